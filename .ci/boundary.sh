#!/usr/bin/env bash
# The native boundary is isolated: only ffi/ touches Deno's unsafe FFI API,
# only ffi/shim_call.ts and ffi/test_aids.ts read the symbol table (and
# ffi/library.ts, which opens it), only native/ holds C or CUDA. The product
# shim exports exactly the symbols of ffi/symbols.ts. ffi/ never imports
# src/, and src/memory/ never imports src/staging/. Every file has a mirrored
# test.
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
if grep -rnE '\.symbols\b' mod.ts src/ ffi/ | grep -vE '^ffi/(shim_call|library|test_aids)\.ts:'; then
  echo "boundary: only ffi/shim_call.ts and ffi/test_aids.ts may read the symbol table" >&2
  fail=1
fi
if find . -path ./native -prune -o -path ./.git -prune -o -path ./.gpu -prune -o -path ./.wt -prune -o \
  \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cpp' \) -print | grep .; then
  echo "boundary: C/CUDA sources belong in native/" >&2
  fail=1
fi
# Only the rooms that touch memory or CUDA import ffi/.
if grep -lE 'from "(\.\./)+ffi/' src/*.ts src/*/*.ts |
  grep -vE '^src/(transfer/|staging/|memory/|gpu/|copy_handle\.ts|device\.ts|tensor\.ts)'; then
  echo "boundary: the files above import ffi/; only transfer/, staging/, memory/, gpu/, copy_handle.ts, device.ts and tensor.ts may" >&2
  fail=1
fi
if grep -nE 'from "(\./|\.\./)(memory|staging)/' src/start_copy.ts src/route.ts src/walk/*.ts src/pack_plan.ts |
  grep -v 'import type'; then
  echo "boundary: start_copy.ts, route.ts, walk/ and pack_plan.ts take no pool or Worker (types only)" >&2
  fail=1
fi
# The walk's folder stays split by concept (issue 20, Deliver 5).
if awk 'FNR == 251 { print FILENAME ": over 250 lines" }' src/walk/*.ts | grep .; then
  echo "boundary: the files above in src/walk/ are over 250 lines: split them by concept" >&2
  fail=1
fi
# Imports point down the layers: ffi/ is below every room of src/, and
# memory/ (the pools and caches, the stager pool among them) is below
# staging/ (which fills pinned memory).
if grep -rnE '(from|import\() *"(\.\./)+src/' ffi/; then
  echo "boundary: the lines above import src/ from ffi/; ffi/ never imports src/ (pass addresses, or move the code to src/ or tests/)" >&2
  fail=1
fi
if grep -rnE '(from|import\() *"(\.\./)+staging/' src/memory/; then
  echo "boundary: the lines above import staging/ from memory/; memory/ never imports staging/ (staging/ builds on memory/)" >&2
  fail=1
fi
# Every import points down docs/ARCHITECTURE.md's rooms and none closes a
# cycle (.ci/layers.ts, which reads the table).
if ! bash .ci/layers.sh; then
  echo "boundary: the layer check failed (.ci/layers.sh): move the import down the rooms, or the file to another room" >&2
  fail=1
fi

# Every file of src/ and ffi/ has a mirrored test, or is listed with why it
# has no logic to test (.ci/mirrors.ts).
if ! deno run --allow-read .ci/mirrors.ts; then
  echo "boundary: the mirror check failed (.ci/mirrors.ts): write the test, or list the file there with why it has no logic" >&2
  fail=1
fi

# Every repository path the docs name in backticks exists (moves leave none stale).
for path in $(grep -ohE '`(src|ffi|native|tests|bench|examples|\.ci)/[A-Za-z0-9_./-]+`' README.md docs/*.md | tr -d '`' | sort -u); do
  if [ ! -e "$path" ]; then
    echo "boundary: README.md or docs/ name $path, which does not exist" >&2
    fail=1
  fi
done

# The product's exports against the symbol table (names, sorted), but the
# one Node-API entry point (native/host_views.c: the same file is loaded by
# process.dlopen for its counted views of pinned memory).
exported=$(nm -D --defined-only native/prebuilt/linux-x86_64/libmtc.so | awk '$2 == "T" { print $3 }' |
  grep -vx 'napi_register_module_v1' | sort)
declared=$(sed -n '/^export const symbols = {/,/^} as const/p' ffi/symbols.ts |
  grep -oE '^  (mtc_[a-z_]+): |name: "mtc_[a-z_]+"' | grep -oE 'mtc_[a-z_]+' |
  grep -v '_nonblocking$' | sort -u)
if [ "$exported" != "$declared" ]; then
  echo "boundary: the product shim's exports differ from ffi/symbols.ts:" >&2
  diff <(echo "$declared") <(echo "$exported") >&2 || true
  fail=1
fi
[ "$fail" = 0 ] && echo "boundary: ok"
exit "$fail"
