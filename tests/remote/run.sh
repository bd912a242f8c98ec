#!/usr/bin/env bash
# The remote-import check, through jsr: as a user imports the package. A
# local stand-in for JSR (serve_registry.ts; JSR_URL points at it) serves
# exactly what `deno publish --dry-run` lists, with the manifest and
# exports JSR would give. From directories outside the repository, with an
# empty HOME, DENO_DIR and cache, no CUDA toolkit reachable (nvcc off PATH,
# CUDA_HOME unset) and only the README's permissions:
#   1. online: the consumer (tests/remote/consumer.ts) imports jsr:@mtc/core,
#      which downloads the shim; every export of mod.ts is imported by name
#      through jsr: and type-checked; a path outside the exports is refused
#      ("Unknown export"), as on jsr.io;
#   2. the offline routine: on a fresh HOME, `jsr:@mtc/core@<v>/install` and
#      `deno cache` while the registry runs; then the registry is stopped,
#      and the consumer runs offline (modules from DENO_DIR, the shim from
#      the cache); without the install step it runs on the CPU and the
#      status names the install command.
# On a machine with a GPU the consumer copies through cuda:0; elsewhere
# through the CPU. Prints a few lines; everything on failure.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

fail() {
  echo "remote: $1" >&2
  [ -n "${2:-}" ] && echo "$2" | sed 's/^/  | /' >&2
  exit 1
}

deno_bin=$(command -v deno)
# shellcheck source=toolkit_free_path.sh
source "$repo/tests/remote/toolkit_free_path.sh"
clean_path=$(toolkit_free_path "$work/bin")
version=$(sed -n 's/^  "version": "\(.*\)",$/\1/p' "$repo/deno.json")

"$deno_bin" run --allow-net=127.0.0.1 --allow-read="$repo" --allow-run="$(readlink -f "$deno_bin")" \
  --allow-env "$repo/tests/remote/serve_registry.ts" >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 150); do
  grep -q '^listening' "$work/server.log" 2>/dev/null && break
  sleep 0.2
done
port=$(sed -n 's/^listening \([0-9]*\).*/\1/p' "$work/server.log")
[ -n "$port" ] || fail "the registry did not start" "$(cat "$work/server.log")"
echo "remote: a stand-in for JSR at http://127.0.0.1:$port/ serves @mtc/core@$version ($(sed -n 's/^listening [0-9]* (\(.*\))/\1/p' "$work/server.log"))"

mkdir -p "$work/consumer"
sed 's|"\.\./\.\./examples/step_kernels_ptx\.ts"|"./step_kernels_ptx.ts"|' "$repo/tests/remote/consumer.ts" >"$work/consumer/main.ts"
cp "$repo/examples/step_kernels_ptx.ts" "$work/consumer/"
# The import map `deno add jsr:@mtc/core` writes (with the version pinned).
echo "{ \"imports\": { \"@mtc/core\": \"jsr:@mtc/core@$version\" } }" >"$work/consumer/deno.json"
"$deno_bin" run --allow-read="$repo" "$repo/tests/remote/exports.ts" check >"$work/consumer/exports.ts"
echo 'import "jsr:@mtc/core/ffi/native.ts";' >"$work/consumer/internal.ts"
values=$("$deno_bin" run --allow-read="$repo" "$repo/tests/remote/exports.ts" values)

# The user's library path stays (the driver may be found through it, as in
# containers), less any CUDA toolkit directory.
clean_ld_path=$(echo "${LD_LIBRARY_PATH:-}" | tr ':' '\n' | grep -v -i cuda | paste -sd: - || true)

# as_user <home> <command...>: in the consumer's directory, with only what a
# user's shell has (HOME, PATH, the driver's library path) and the registry.
as_user() {
  local home=$1
  shift
  mkdir -p "$home"
  (cd "$work/consumer" && env -i PATH="$clean_path" HOME="$home" LD_LIBRARY_PATH="$clean_ld_path" \
    DENO_DIR="$home/deno" JSR_URL="http://127.0.0.1:$port/" NO_COLOR=1 "$@")
}
# The README's flags, as a shell expands them (single quotes keep $HOME for bash -c).
# shellcheck disable=SC2016
flags='--allow-env=MTC_SHIM_PATH,XDG_CACHE_HOME,HOME --allow-read="$HOME/.cache/mtc-core" --allow-write="$HOME/.cache/mtc-core"'
net="--allow-net=127.0.0.1:$port"

consumer() { # consumer <home> [net]
  # shellcheck disable=SC2086
  as_user "$1" bash -c "deno run --no-check $flags ${2:-} --allow-ffi main.ts $values"
}

online="$work/online"
out=$(consumer "$online" "$net" 2>&1) || fail "the consumer failed online" "$out"
grep -q "^shim: $online/.cache/mtc-core/$version/" <<<"$out" ||
  fail "the first run did not load the shim from the user cache" "$out"
grep -q '^prefetch via .*: 3 batches, bit-exact' <<<"$out" || fail "prefetch did not run" "$out"
kernel_ran() { ! grep -q '^round trip via cuda' <<<"$1" || grep -q '^kernel via cuda:0: PTX loaded and launched' <<<"$1"; }
kernel_ran "$out" || fail "the PTX kernel did not run" "$out"
echo "remote: online, empty HOME and DENO_DIR: the shim downloaded into \$HOME/.cache/mtc-core, $(sed -n 's/^\(round trip via [^:]*\):.*/\1/p' <<<"$out"), every value export found"
checked=$(as_user "$online" deno check exports.ts 2>&1) ||
  fail "an export of mod.ts is not exported through jsr:" "$checked"
internal=$(as_user "$online" deno run internal.ts 2>&1) &&
  fail "a module outside the exports was importable (the stand-in is not JSR)" "$internal"
grep -q "Unknown export './ffi/native.ts'" <<<"$internal" ||
  fail "importing a path outside the exports did not fail as on JSR" "$internal"
echo "remote: every export of mod.ts type-checks through jsr:; jsr:@mtc/core/ffi/native.ts is an Unknown export"

offline="$work/offline"
installed=$(as_user "$offline" bash -c "deno run $flags $net jsr:@mtc/core@$version/install" 2>&1) ||
  fail "the install step failed" "$installed"
grep -q "now cached at $offline/.cache/mtc-core/$version/" <<<"$installed" ||
  fail "the install step did not cache the shim" "$installed"
cached=$(as_user "$offline" deno cache main.ts 2>&1) || fail "deno cache failed" "$cached"
no_install="$work/no-install"
cached=$(as_user "$no_install" deno cache main.ts 2>&1) || fail "deno cache failed" "$cached"

kill "$server_pid"
wait "$server_pid" 2>/dev/null || true
server_pid=""
out=$(consumer "$offline" 2>&1) || fail "the consumer failed offline after the install step" "$out"
grep -q "^shim: $offline/.cache/mtc-core/$version/" <<<"$out" ||
  fail "offline, the shim did not come from the cache" "$out"
kernel_ran "$out" || fail "the PTX kernel did not run offline" "$out"
echo "remote: offline after install + deno cache (registry stopped): $(sed -n 's/^\(round trip via [^:]*\):.*/\1/p' <<<"$out"), shim from the cache"
out=$(consumer "$online" 2>&1) || fail "the consumer failed offline on the first run's cache" "$out"
out=$(consumer "$no_install" "$net" 2>&1) &&
  fail "without the install step, offline, the consumer loaded a shim" "$out"
grep -q 'jsr:@mtc/core/install' <<<"$out" ||
  fail "offline without the install step, the status does not name the install command" "$out"
echo "remote: offline without install: the status names jsr:@mtc/core/install; the CPU target is left"
echo "remote: ok"
