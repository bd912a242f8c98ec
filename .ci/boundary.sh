#!/usr/bin/env bash
# The native boundary is isolated: only ffi/ touches Deno's unsafe FFI API,
# only ffi/native.ts reads the symbol table, only native/ holds C or CUDA.
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0
if grep -rnE 'Deno\.(dlopen|UnsafePointer|UnsafePointerView|UnsafeCallback|UnsafeFnPointer)' \
  mod.ts src/ examples/; then
  echo "boundary: the lines above use Deno's unsafe FFI API outside ffi/" >&2
  fail=1
fi
if grep -rn 'Deno\.dlopen(' ffi/ | grep -v '^ffi/library.ts:'; then
  echo "boundary: only ffi/library.ts may call Deno.dlopen" >&2
  fail=1
fi
if grep -rnE '\.symbols\b' mod.ts src/ ffi/ | grep -vE '^ffi/(native|library)\.ts:'; then
  echo "boundary: only ffi/native.ts may read the symbol table" >&2
  fail=1
fi
if find . -path ./native -prune -o -path ./.git -prune -o -path ./.gpu -prune -o \
  \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cpp' \) -print | grep .; then
  echo "boundary: C/CUDA sources belong in native/" >&2
  fail=1
fi
[ "$fail" = 0 ] && echo "boundary: ok"
exit "$fail"
