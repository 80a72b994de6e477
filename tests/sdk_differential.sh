#!/usr/bin/env bash
# Differential test of `mnemo tool --profile python-sdk` against the Anthropic Python SDK's
# BetaLocalFilesystemMemoryTool (anthropic==2.14.0). See tests/sdk_differential.py.
#
# Usage: bash tests/sdk_differential.sh [STEPS]
#   STEPS        total random steps (default: $MNEMO_DIFF_STEPS, else 3000)
#   MNEMO_DIFF_SEED  base seed (default 20250818; seeds SEED, SEED+1, SEED+2 are run)
#
# Writes only under the repository's target/ (the venv in target/sdk-venv, the cargo build) and
# a temporary directory (the SDK's files and the store, removed afterwards). pip runs without its
# cache so that nothing lands in $HOME. Exits non-zero on any mismatch.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

steps="${1:-${MNEMO_DIFF_STEPS:-3000}}"
seed="${MNEMO_DIFF_SEED:-20250818}"
case "$steps" in
  '' | *[!0-9]*) echo "sdk_differential.sh: STEPS must be a whole number, got '$steps'" >&2; exit 2 ;;
esac

# shellcheck source=tests/venv.sh
. "$repo/tests/venv.sh"
ensure_venv sdk_differential.sh "$repo/target/sdk-venv" anthropic 2.14.0

# The debug build the test suites share: what is compared is text, not speed.
cargo build --bin mnemo
mnemo="$(cargo_target_dir "$repo")/debug/mnemo"

exec "$repo/target/sdk-venv/bin/python" "$repo/tests/sdk_differential.py" --mnemo "$mnemo" --steps "$steps" --seed "$seed"
