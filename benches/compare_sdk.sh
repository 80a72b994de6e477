#!/usr/bin/env bash
# Times Mnemo against the Anthropic Python SDK's BetaLocalFilesystemMemoryTool (anthropic==2.14.0)
# on the same workloads on this machine. See benches/compare_sdk.py.
#
# Usage: bash benches/compare_sdk.sh [compare_sdk.py options, e.g. --durability buffered]
#
# Installs anthropic==2.14.0 and Mnemo's Python package (from this clone) into target/py-venv,
# the venv python/test.sh uses, builds `mnemo` in release mode, and runs the comparison with its
# files under target/compare-sdk (removed afterwards). pip runs without its cache so nothing lands
# in $HOME. Takes about three to five minutes.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

# shellcheck source=tests/venv.sh
. "$repo/tests/venv.sh"

# The venv of the Python package's tests (python/test.sh): the SDK at the pinned version and
# Mnemo's own package, installed from this clone with README's command, for the in-process column.
venv="$repo/target/py-venv"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet './python[anthropic-memory-tool]' "anthropic==2.14.0"

cargo build --release --bin mnemo
target_dir="$(cargo_target_dir "$repo")"

exec "$venv/bin/python" "$repo/benches/compare_sdk.py" --mnemo "$target_dir/release/mnemo" \
  --workdir "$target_dir/compare-sdk" "$@"
