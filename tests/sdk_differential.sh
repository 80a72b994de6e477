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
sdk_version="2.14.0"
venv="$repo/target/sdk-venv"
python="$venv/bin/python"

case "$steps" in
  '' | *[!0-9]*) echo "sdk_differential.sh: STEPS must be a whole number, got '$steps'" >&2; exit 2 ;;
esac

export PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1

venv_ready() {
  [ -x "$python" ] && "$python" - "$sdk_version" <<'EOF' 2>/dev/null
import sys
import anthropic
sys.exit(0 if anthropic.__version__ == sys.argv[1] else 1)
EOF
}

if ! venv_ready; then
  echo "sdk_differential.sh: creating $venv with anthropic==$sdk_version" >&2
  mkdir -p "$repo/target"
  python3 -m venv --clear "$venv"
  "$python" -m pip install --quiet "anthropic==$sdk_version"
  venv_ready || { echo "sdk_differential.sh: anthropic==$sdk_version is not importable in $venv" >&2; exit 2; }
fi

cargo build --release --bin mnemo
target_dir="${CARGO_TARGET_DIR:-$repo/target}"
case "$target_dir" in /*) ;; *) target_dir="$repo/$target_dir" ;; esac
mnemo="$target_dir/release/mnemo"

exec "$python" "$repo/tests/sdk_differential.py" --mnemo "$mnemo" --steps "$steps" --seed "$seed"
