#!/usr/bin/env bash
# Builds native/build/libmtc.so from native/mtc.cu with the machine's CUDA
# toolkit ($CUDA_HOME, else /usr/local/cuda). Rebuilds only when the source or
# this script changed (a content hash is kept beside the output).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out="$here/build"
lib="$out/libmtc.so"
cuda_home=${CUDA_HOME:-/usr/local/cuda}
nvcc="$cuda_home/bin/nvcc"
if [ ! -x "$nvcc" ]; then
  if command -v nvcc >/dev/null 2>&1; then
    nvcc=$(command -v nvcc)
  else
    echo "error: cannot build the @mtc/core shim: nvcc not found at $cuda_home/bin/nvcc or on PATH." >&2
    echo "Install the CUDA toolkit, or set CUDA_HOME to its directory." >&2
    exit 1
  fi
fi
hash=$(cat "$here/mtc.cu" "$0" | sha256sum | cut -d' ' -f1)
if [ -f "$lib" ] && [ "$(cat "$out/.hash" 2>/dev/null)" = "$hash" ]; then
  echo "native/build/libmtc.so is up to date"
  exit 0
fi
mkdir -p "$out"
# sm_90 code for Hopper, plus PTX that newer or other GPUs JIT-compile.
# cudart is linked statically: the only run-time dependency is libcuda.so.1.
"$nvcc" -O2 -shared -Xcompiler -fPIC,-fvisibility=hidden -cudart static \
  -gencode arch=compute_90,code=sm_90 -gencode arch=compute_75,code=compute_75 \
  -o "$lib.tmp" "$here/mtc.cu"
mv "$lib.tmp" "$lib"
echo "$hash" >"$out/.hash"
echo "built native/build/libmtc.so with $("$nvcc" --version | tail -1)"
