#!/usr/bin/env bash
# `deno task test`: builds the test-aid shim (native/build.sh --test-aids)
# where a C compiler exists, runs the whole suite (or the files given), then
# says in one line per kind which tests were skipped (ignored) and why.
# Without a C compiler, every test that needs neither a GPU nor the
# test-aid build still runs, against the committed prebuilt shim.
set -uo pipefail
cd "$(dirname "$0")/.."

build_log=$(mktemp)
log=$(mktemp)
trap 'rm -f "$build_log" "$log"' EXIT

if bash native/build.sh --test-aids >"$build_log" 2>&1; then
  export MTC_SHIM_PATH=native/build/libmtc_testaid.so
  aids=1
elif grep -q 'no C compiler' "$build_log"; then
  aids=0
  echo "test: no C compiler (cc, gcc or clang) on PATH: the test-aid build is skipped; the tests run against the committed prebuilt shim"
else
  cat "$build_log" >&2
  exit 1
fi

export MTC_IDLE_RELEASE_MS=Infinity
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(tests/ mod.ts src/ ffi/ examples/)
deno test --allow-ffi --allow-read --allow-write --allow-env --allow-run --allow-net=127.0.0.1 \
  --v8-flags=--expose-gc --sanitize-ops --sanitize-resources --doc "${targets[@]}" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}

# Ignored tests: those that need something else than a GPU say so at the
# end of their names, "(needs ...)"; the others are GPU tests.
ignored=$(sed 's/\x1b\[[0-9;]*m//g' "$log" | sed -n 's/ \.\.\. ignored.*//p')
needs=$(grep -E '\(needs [^)]*\)$' <<<"$ignored" || true)
gpu=$(grep -cvE '\(needs [^)]*\)$' <<<"$ignored" || true)
[ -n "$ignored" ] || gpu=0
if [ "$gpu" -gt 0 ]; then
  count=$(deno eval --quiet 'import { deviceCount } from "./mod.ts"; console.log(deviceCount())' 2>/dev/null || echo 0)
  why=$(deno eval --quiet 'import { cudaStatus } from "./mod.ts"; console.log(cudaStatus().message)' 2>/dev/null || true)
  tests=$([ "$gpu" = 1 ] && echo "GPU test" || echo "GPU tests")
  if [ "$count" = 0 ]; then
    echo "test: $gpu $tests skipped: ${why:-no CUDA device can be used}"
  elif [ "$aids" = 0 ]; then
    echo "test: $gpu $tests skipped: they read device memory back through the test-aid build, which needs a C compiler"
  else
    echo "test: $gpu $tests skipped: they need more than this machine has ($why), e.g. two GPUs"
  fi
fi
if [ -n "$needs" ]; then
  sed 's/.*(needs \([^)]*\))$/\1/' <<<"$needs" | sort | uniq -c | while read -r count need; do
    echo "test: $count more skipped, needing $need"
  done
fi
exit "$status"
