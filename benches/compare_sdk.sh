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

sdk_version="2.14.0"
venv="$repo/target/sdk-venv"
python="$venv/bin/python"

export PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1

venv_ready() {
  [ -x "$python" ] && "$python" - "$sdk_version" <<'PY' 2>/dev/null
import sys
import anthropic
sys.exit(0 if anthropic.__version__ == sys.argv[1] else 1)
PY
}

if ! venv_ready; then
  echo "compare_sdk.sh: creating $venv with anthropic==$sdk_version" >&2
  mkdir -p "$repo/target"
  python3 -m venv --clear "$venv"
  "$python" -m pip install --quiet "anthropic==$sdk_version"
  venv_ready || { echo "compare_sdk.sh: anthropic==$sdk_version is not importable in $venv" >&2; exit 2; }
fi

cargo build --release --bin mnemo
target_dir="${CARGO_TARGET_DIR:-$repo/target}"
case "$target_dir" in /*) ;; *) target_dir="$repo/$target_dir" ;; esac

exec "$python" "$repo/benches/compare_sdk.py" --mnemo "$target_dir/release/mnemo" \
  --workdir "$target_dir/compare-sdk" "$@"
