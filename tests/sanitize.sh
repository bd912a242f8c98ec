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
# handler frees those.
set -uo pipefail
cd "$(dirname "$0")/.."
sanitizer="${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer"
[ -x "$sanitizer" ] || sanitizer=$(command -v compute-sanitizer) || {
  echo "sanitize: compute-sanitizer not found (set CUDA_HOME)" >&2
  exit 2
}
bash native/build.sh --test-aids >/dev/null
files=$(ls tests/gpu/*_test.ts | grep -v sticky_error_test.ts)
export MTC_UNDER_SANITIZER=1 NO_COLOR=1 MTC_SHIM_PATH=native/build/libmtc_testaid.so MTC_IDLE_RELEASE_MS=Infinity MTC_SOAK_ROUNDS=300
status=0
# Tools as arguments ("racecheck"), or all three.
tools=("$@")
[ ${#tools[@]} -eq 0 ] && tools=("memcheck --leak-check full" racecheck synccheck)
for tool in "${tools[@]}"; do
  log=$(mktemp)
  # shellcheck disable=SC2086
  "$sanitizer" --tool $tool --target-processes all --print-limit 20 \
    deno test --allow-ffi --allow-read --allow-write --allow-env --allow-run \
    --v8-flags=--expose-gc $files >"$log" 2>&1
  tests=$(grep -aE '^(ok|FAILED) \|' "$log" | tail -1 | sed 's/\x1b\[[0-9;]*m//g')
  summary=$(grep -aE 'ERROR SUMMARY|LEAK SUMMARY|RACECHECK SUMMARY' "$log" | sort | uniq -c)
  echo "== $tool: ${tests:-no test summary}"
  echo "$summary"
  # Each kind of report once, with how often it came.
  grep -aE '^========= [A-Z]' "$log" | grep -avE 'SUMMARY|^========= (COMPUTE-SANITIZER|Saved host backtrace|Host Frame)' |
    cut -c1-160 | sort | uniq -c | sort -rn | head -20
  grep -aE '^(error|.* FAILED)' "$log" | head -10
  if grep -aE 'ERROR SUMMARY: [1-9]' "$log" >/dev/null || [ -z "$tests" ] || [[ "$tests" == FAILED* ]]; then
    status=1
  fi
  # Keep the whole log where asked (MTC_SANITIZE_LOGS=<dir>).
  if [ -n "${MTC_SANITIZE_LOGS:-}" ]; then
    mkdir -p "$MTC_SANITIZE_LOGS" && cp "$log" "$MTC_SANITIZE_LOGS/${tool%% *}.log"
  fi
  rm -f "$log"
done
exit "$status"
