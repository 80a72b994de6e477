#!/usr/bin/env bash
# The npm package in js/ (mnemo-db) with Node's test runner: README's TypeScript quick start, the
# SDK's tool runner against a fake Messages API, typed errors, and the differential test of the
# typescript-sdk profile against @anthropic-ai/sdk 1.16.0's BetaLocalFilesystemMemoryTool
# (pinned by js/package-lock.json). See js/test/.
#
# Usage: bash tests/ts_package.sh [STEPS]
#   STEPS                differential steps (default: $MNEMO_TS_DIFF_STEPS, else 2000)
#   MNEMO_TS_DIFF_SEED   base seed (default 20250818; four seeds from it are run)
#
# Writes only under the repository (js/node_modules, ignored by git; the cargo build) and
# temporary directories the tests remove. Exits non-zero on any failure.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

steps="${1:-${MNEMO_TS_DIFF_STEPS:-2000}}"
case "$steps" in
  '' | *[!0-9]*) echo "ts_package.sh: STEPS must be a whole number, got '$steps'" >&2; exit 2 ;;
esac

# shellcheck source=tests/venv.sh
. "$repo/tests/venv.sh"

command -v node > /dev/null || { echo "ts_package.sh: node (20 or newer) is not on PATH" >&2; exit 2; }
(cd js && npm ci --no-audit --no-fund --loglevel=error)

cargo build --quiet --bin mnemo
MNEMO_BIN="$(cargo_target_dir "$repo")/debug/mnemo" MNEMO_TS_DIFF_STEPS="$steps" exec node --test js/test/*.test.mjs
