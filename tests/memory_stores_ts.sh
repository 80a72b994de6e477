#!/usr/bin/env bash
# Contract test of `mnemo serve --data`'s memory-stores API against the official TypeScript SDK
# in both pinned versions (@anthropic-ai/sdk 1.16.0, and 1.17.0 as the alias anthropic-sdk-1.17;
# pinned by tests/sdk-ts/package-lock.json), with Node's test runner: every test runs once per
# version. See tests/sdk-ts/memory_stores.test.mjs, and tests/sdk-ts/fleet.test.mjs for the SDK
# through a node of a two-node fleet that does not hold the store.
#
# Writes only under the repository (tests/sdk-ts/node_modules, ignored by git; the cargo build)
# and a temporary directory the test removes. Exits non-zero on any failure.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

# shellcheck source=tests/venv.sh
. "$repo/tests/venv.sh"

command -v node > /dev/null || { echo "memory_stores_ts.sh: node (20 or newer) is not on PATH" >&2; exit 2; }
(cd tests/sdk-ts && npm ci --no-audit --no-fund --loglevel=error)

cargo build --quiet --features serve,replicate --bin mnemo
MNEMO_BIN="$(cargo_target_dir "$repo")/debug/mnemo" exec node --test tests/sdk-ts/
