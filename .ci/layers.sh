#!/usr/bin/env bash
# The layer check (.ci/layers.ts): no import cycle among the project's files
# and no import that climbs back up the rooms of docs/ARCHITECTURE.md's
# table (a file imports its own room and the rooms below it). Run by
# .ci/boundary.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
graphs=$(mktemp -d)
trap 'rm -rf "$graphs"' EXIT
deno info --json mod.ts >"$graphs/mod.json"
deno info --json ffi/test_aids.ts >"$graphs/test_aids.json"
deno run --quiet --no-prompt --allow-read .ci/layers.ts "$graphs/mod.json" "$graphs/test_aids.json"
