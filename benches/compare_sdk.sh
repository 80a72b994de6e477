#!/usr/bin/env bash
# Times Mnemo against the Anthropic Python SDK's BetaLocalFilesystemMemoryTool (anthropic==2.14.0)
# on the same workloads on this machine. See benches/compare_sdk.py.
#
# Usage: bash benches/compare_sdk.sh [compare_sdk.py options, e.g. --durability buffered]
#
# Makes (or reuses) a venv in target/sdk-venv with anthropic==2.14.0 (the one the differential
# test uses), builds `mnemo` in release mode, and runs the comparison with its files under
# target/compare-sdk (removed afterwards). pip runs without its cache so nothing lands in $HOME.
# Takes about two to three minutes.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

# shellcheck source=tests/venv.sh
. "$repo/tests/venv.sh"
ensure_venv compare_sdk.sh "$repo/target/sdk-venv" anthropic 2.14.0

cargo build --release --bin mnemo
target_dir="$(cargo_target_dir "$repo")"

exec "$repo/target/sdk-venv/bin/python" "$repo/benches/compare_sdk.py" --mnemo "$target_dir/release/mnemo" \
  --workdir "$target_dir/compare-sdk" "$@"
