#!/usr/bin/env bash
# Builds the Python package from this clone into a virtual environment and runs its tests.
#
# Usage: bash python/test.sh [PYTEST_ARGS...]
#
# The venv is target/py-venv; the wheel is built by pip through maturin (the build backend named in
# python/pyproject.toml) with the same command README.md gives, plus pytest and the SDK version the
# tests are pinned to. The Rust build shares the workspace's target/ directory. pip runs without
# its cache so that nothing lands in $HOME.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

venv="$repo/target/py-venv"
python="$venv/bin/python"
sdk_version="2.14.0"

export PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1

if [ ! -x "$python" ]; then
  mkdir -p "$repo/target"
  python3 -m venv "$venv"
fi

# The README command (pip rebuilds a local directory on every install), with the tests' own
# requirements pinned beside it.
"$python" -m pip install --quiet './python[anthropic-memory-tool]' "anthropic==$sdk_version" 'pytest>=8,<10'

# The remote-client tests start a real `mnemo serve` on loopback: the CLI built with the server
# (the debug build tests/mcp_client.sh and tests/s3_replica.sh use, so CI builds it once).
cargo build --quiet --features serve,replicate --bin mnemo
export MNEMO_SERVE_BIN="$repo/target/debug/mnemo"

"$python" -m pytest -p no:cacheprovider "$repo/python/tests" "$@"

# The extra allows every SDK from the first with the memory-tool helpers the adapter builds on
# (0.84.0: BetaAbstractMemoryTool and ToolError in anthropic.lib.tools) to the newest tested
# above: the adapter's tests run again on that lowest version. Skipped when pytest was given
# arguments (a run of chosen tests).
if [ "$#" -eq 0 ]; then
  lowest_sdk="$(sed -n 's/^anthropic-memory-tool = \["anthropic>=\([0-9.]*\),.*/\1/p' python/pyproject.toml)"
  [ -n "$lowest_sdk" ] || { echo "python/test.sh: no lowest anthropic version in python/pyproject.toml" >&2; exit 1; }
  echo "== the adapter on the lowest SDK the extra allows: anthropic==$lowest_sdk"
  "$python" -m pip install --quiet "anthropic==$lowest_sdk.0"
  # Its SDK has no BetaLocalFilesystemMemoryTool, so the comparison with it runs on the pinned SDK
  # above only.
  echo "(not run here: test_adapter_answers_like_the_sdks_filesystem_tool, which needs the SDK's own filesystem tool)"
  "$python" -m pytest -p no:cacheprovider "$repo/python/tests/test_anthropic_memory_tool.py" \
    -k "not test_adapter_answers_like_the_sdks_filesystem_tool"
  "$python" -m pip install --quiet "anthropic==$sdk_version"
fi
