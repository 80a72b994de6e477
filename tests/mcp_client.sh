#!/usr/bin/env bash
# End-to-end test of `mnemo mcp` with the official Python MCP SDK (mcp==2.3.0) as the client.
# See tests/mcp_client.py for what it checks.
#
# Usage: bash tests/mcp_client.sh
#
# Writes only under the repository's target/ (the venv in target/mcp-venv, the cargo build) and
# temporary directories (the stores, removed afterwards). pip runs without its cache so that
# nothing lands in $HOME. Exits non-zero on any failure.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

mcp_version="2.3.0"
venv="$repo/target/mcp-venv"
python="$venv/bin/python"

export PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1

venv_ready() {
  [ -x "$python" ] && "$python" - "$mcp_version" <<'PY' 2>/dev/null
import importlib.metadata
import sys
import mcp  # noqa: F401 (the import is the check)
sys.exit(0 if importlib.metadata.version("mcp") == sys.argv[1] else 1)
PY
}

if ! venv_ready; then
  echo "mcp_client.sh: creating $venv with mcp==$mcp_version" >&2
  mkdir -p "$repo/target"
  python3 -m venv --clear "$venv"
  "$python" -m pip install --quiet "mcp==$mcp_version"
  venv_ready || { echo "mcp_client.sh: mcp==$mcp_version is not importable in $venv" >&2; exit 2; }
fi

# The library's unit tests of the MCP module, then the binary the client starts.
cargo test --features mcp --lib mcp::
cargo build --release --features mcp --bin mnemo
target_dir="${CARGO_TARGET_DIR:-$repo/target}"
case "$target_dir" in /*) ;; *) target_dir="$repo/$target_dir" ;; esac
mnemo="$target_dir/release/mnemo"

exec "$python" "$repo/tests/mcp_client.py" --mnemo "$mnemo" --readme "$repo/README.md"
