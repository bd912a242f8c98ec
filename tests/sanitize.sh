#!/usr/bin/env bash
# Runs the GPU tests under compute-sanitizer: memcheck with a full leak
# check, racecheck and synccheck. Prints each tool's summary; exits non-zero
# if any tool reports an error. Needs a GPU and the CUDA toolkit's
# compute-sanitizer (CUDA_HOME or /usr/local/cuda).
#
# Left out: sticky_error_test.ts, which faults a kernel on purpose (memcheck
# reports that write, rightly). The soak runs 300 round trips instead of
# 3000 (every CUDA call is much slower under the tools) and does not bound
# RSS (the tools' shadow memory grows it); the two tests that make a device
# allocation fail on purpose (out of memory, an absurd size) are skipped
# (MTC_UNDER_SANITIZER=1), since the tools report those calls, rightly.
# The tests that end Workers run too: what an ended Worker held comes back
# to the shim's process-wide caches when its thread ends, and the exit
# handler frees those. Skipped too: the two checks of bad input that only
# the driver can refuse (malformed PTX, an unknown kernel name:
# tests/gpu/kernels_test.ts), and the test that needs a long kernel to
# overlap another stream's (the tools run kernels one at a time).
#
# One kind of report is expected and not counted as an error: where the
# driver cannot count a kernel's parameters (cuFuncGetParamCount, drivers
# newer than CUDA 13.0), `module.kernel()` asks cuFuncGetParamInfo for one
# parameter past those declared, and the driver's CUDA_ERROR_INVALID_VALUE
# there is what says the kernel takes no more (native/modules.c). The tools
# report every failed API call (--report-api-errors cannot spare one call
# without hiding all of them), so those reports, exactly that error on
# exactly that call, are counted and subtracted; any other report fails.
#
# MTC_SANITIZE_FILES="tests/gpu/a_test.ts ..." restricts the run to those
# files.
set -uo pipefail
cd "$(dirname "$0")/.."
sanitizer="${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer"
[ -x "$sanitizer" ] || sanitizer=$(command -v compute-sanitizer) || {
  echo "sanitize: compute-sanitizer not found (set CUDA_HOME)" >&2
  exit 2
}
bash native/build.sh --test-aids >/dev/null
files=${MTC_SANITIZE_FILES:-$(ls tests/gpu/*_test.ts | grep -v sticky_error_test.ts)}
export MTC_UNDER_SANITIZER=1 NO_COLOR=1 MTC_SHIM_PATH=native/build/libmtc_testaid.so MTC_IDLE_RELEASE_MS=Infinity MTC_SOAK_ROUNDS=300
status=0
# Tools as arguments ("racecheck"), or all three.
tools=("$@")
[ ${#tools[@]} -eq 0 ] && tools=("memcheck --leak-check full" racecheck synccheck)
for tool in "${tools[@]}"; do
  log=$(mktemp)
  # shellcheck disable=SC2086
  "$sanitizer" --tool $tool --target-processes all --print-limit 10000 \
    deno test --allow-ffi --allow-read --allow-write --allow-env --allow-run \
    --v8-flags=--expose-gc $files >"$log" 2>&1
  tests=$(grep -aE '^(ok|FAILED) \|' "$log" | tail -1 | sed 's/\x1b\[[0-9;]*m//g')
  summary=$(grep -aE 'ERROR SUMMARY|LEAK SUMMARY|RACECHECK SUMMARY' "$log" | sort | uniq -c)
  reported=$(grep -aoE 'ERROR SUMMARY: [0-9]+' "$log" | awk '{ n += $3 } END { print n + 0 }')
  probes=$(grep -acE 'Program hit CUDA_ERROR_INVALID_VALUE .*on CUDA API call to cuFuncGetParamInfo' "$log")
  echo "== $tool: ${tests:-no test summary}"
  echo "$summary"
  echo "   $reported reported, of which $probes the expected parameter probe: $((reported - probes)) errors"
  # Each kind of report once, with how often it came.
  grep -aE '^========= [A-Z]' "$log" | grep -avE 'SUMMARY|^========= (COMPUTE-SANITIZER|Saved host backtrace|Host Frame)' |
    cut -c1-160 | sort | uniq -c | sort -rn | head -20
  grep -aE '^(error|.* FAILED)' "$log" | head -10
  if [ "$((reported - probes))" -ne 0 ] || [ -z "$tests" ] || [[ "$tests" == FAILED* ]]; then
    status=1
  fi
  # Keep the whole log where asked (MTC_SANITIZE_LOGS=<dir>).
  if [ -n "${MTC_SANITIZE_LOGS:-}" ]; then
    mkdir -p "$MTC_SANITIZE_LOGS" && cp "$log" "$MTC_SANITIZE_LOGS/${tool%% *}.log"
  fi
  rm -f "$log"
done
exit "$status"
