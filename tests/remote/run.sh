#!/usr/bin/env bash
# The remote-import check: serves exactly what `deno publish --dry-run`
# lists over HTTP on 127.0.0.1, then runs tests/remote/consumer.ts from a
# directory outside the repository against http://127.0.0.1:<port>/mod.ts,
# with an empty DENO_DIR and an empty cache directory, with no CUDA toolkit
# reachable (nvcc off PATH, CUDA_HOME unset) and only the documented
# permissions. Then stops the server and runs it again: it must still work
# (modules from DENO_DIR, the shim from the user cache). On a machine with
# a GPU the consumer goes through cuda:0; elsewhere through the CPU.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

deno_bin=$(command -v deno)
# shellcheck source=toolkit_free_path.sh
source "$repo/tests/remote/toolkit_free_path.sh"
clean_path=$(toolkit_free_path "$work/bin")

"$deno_bin" run --allow-net=127.0.0.1 --allow-read="$repo" --allow-run="$(readlink -f "$deno_bin")" \
  --allow-env "$repo/tests/remote/serve_package.ts" >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 100); do
  grep -q '^listening' "$work/server.log" 2>/dev/null && break
  sleep 0.2
done
port=$(sed -n 's/^listening \([0-9]*\).*/\1/p' "$work/server.log")
[ -n "$port" ] || { cat "$work/server.log" >&2; exit 1; }
url="http://127.0.0.1:$port"
echo "remote: serving the package at $url ($(sed -n 's/^listening [0-9]* (\(.*\))/\1/p' "$work/server.log"))"

mkdir -p "$work/consumer" "$work/deno_dir" "$work/cache"
sed "s|\"\\.\\./\\.\\./|\"$url/|g" "$repo/tests/remote/consumer.ts" >"$work/consumer/main.ts"

# The user's library path stays (the driver may be found through it, as in
# containers), less any CUDA toolkit directory.
clean_ld_path=$(echo "${LD_LIBRARY_PATH:-}" | tr ':' '\n' | grep -v -i cuda | paste -sd: - || true)

run_consumer() {
  (cd "$work/consumer" && env -i PATH="$clean_path" HOME="$work/home" LD_LIBRARY_PATH="$clean_ld_path" \
    DENO_DIR="$work/deno_dir" XDG_CACHE_HOME="$work/cache" NO_COLOR=1 \
    "$deno_bin" run --no-check --allow-import="127.0.0.1:$port" --allow-net="127.0.0.1:$port" \
    --allow-ffi --allow-read="$work/cache" --allow-write="$work/cache" \
    --allow-env=MTC_SHIM_PATH,XDG_CACHE_HOME,HOME main.ts)
}

echo "remote: first run (empty DENO_DIR, empty cache)"
first=$(run_consumer 2>&1) || { echo "$first"; exit 1; }
echo "$first" | sed 's/^/  /'
echo "$first" | grep -q '^shim: download ' || { echo "remote: the first run did not download the shim" >&2; exit 1; }
echo "$first" | grep -q '^prefetch via .*: 3 batches, bit-exact' || { echo "remote: prefetch did not run" >&2; exit 1; }
if echo "$first" | grep -q '^round trip via cuda'; then
  echo "$first" | grep -q '^kernel via cuda:0: PTX loaded and launched' ||
    { echo "remote: the PTX kernel did not run" >&2; exit 1; }
fi

# Every module the copy path loads must be in DENO_DIR for an offline GPU
# node (the background staging module is one the CPU path never runs).
grep -rlq 'BACKGROUND_MIN_BYTES' "$work/deno_dir" ||
  { echo "remote: the background staging module is not in DENO_DIR" >&2; exit 1; }

kill "$server_pid"
wait "$server_pid" 2>/dev/null || true
server_pid=""
echo "remote: second run, server stopped"
second=$(run_consumer 2>&1) || { echo "$second"; exit 1; }
echo "$second" | sed 's/^/  /'
echo "$second" | grep -q '^shim: cache ' || { echo "remote: the second run did not use the cache" >&2; exit 1; }
if echo "$second" | grep -q '^round trip via cuda'; then
  echo "$second" | grep -q '^kernel via cuda:0: PTX loaded and launched' ||
    { echo "remote: the PTX kernel did not run offline" >&2; exit 1; }
fi
echo "remote: ok"
