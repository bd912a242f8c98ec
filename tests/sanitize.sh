#!/usr/bin/env bash
# Runs the GPU tests under compute-sanitizer: memcheck with a full leak
# check, racecheck and synccheck. Prints each tool's summary; exits non-zero
# if any tool reports an error. Needs a GPU and the CUDA toolkit's
# compute-sanitizer (CUDA_HOME or /usr/local/cuda).
#
# Left out: sticky_error_test.ts, which faults a kernel on purpose (memcheck
# reports that write, rightly). The soak runs 300 round trips instead of
# 3000 (every CUDA call is much slower under the tools). Errors the tests
# provoke on purpose through the driver (running out of device memory) are
# reported as API errors; the listing below shows which calls they were.
set -uo pipefail
cd "$(dirname "$0")/.."
sanitizer="${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer"
[ -x "$sanitizer" ] || sanitizer=$(command -v compute-sanitizer) || {
  echo "sanitize: compute-sanitizer not found (set CUDA_HOME)" >&2
  exit 2
}
bash native/build.sh --test-aids >/dev/null
files=$(ls tests/gpu/*_test.ts | grep -v sticky_error_test.ts)
export MTC_SHIM_PATH=native/build/libmtc_testaid.so MTC_IDLE_RELEASE_MS=Infinity MTC_SOAK_ROUNDS=300
status=0
for tool in "memcheck --leak-check full" racecheck synccheck; do
  log=$(mktemp)
  # shellcheck disable=SC2086
  "$sanitizer" --tool $tool --target-processes all --print-limit 20 \
    deno test --allow-ffi --allow-read --allow-write --allow-env --allow-run \
    --v8-flags=--expose-gc $files >"$log" 2>&1
  tests=$(grep -aE '^(ok|FAILED) \|' "$log" | tail -1 | sed 's/\x1b\[[0-9;]*m//g')
  summary=$(grep -aE 'ERROR SUMMARY|LEAK SUMMARY|RACECHECK SUMMARY' "$log" | sort | uniq -c)
  echo "== $tool: ${tests:-no test summary}"
  echo "$summary"
  grep -aE '^========= (Program hit|Invalid|Leaked|Race|Barrier|Error)' "$log" | sort | uniq -c | head -20
  if grep -aE 'ERROR SUMMARY: [1-9]' "$log" >/dev/null || [ -z "$tests" ] || [[ "$tests" == FAILED* ]]; then
    status=1
  fi
  rm -f "$log"
done
exit "$status"
