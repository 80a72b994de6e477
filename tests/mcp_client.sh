#!/usr/bin/env bash
# End-to-end test of `mnemo mcp` (stdio) and `mnemo serve` (MCP over streamable HTTP) with the
# official Python MCP SDK (mcp==2.3.0) as the client. See tests/mcp_client.py,
# tests/mcp_http_client.py and tests/mcp_fleet_client.py for what they check.
#
# Usage: bash tests/mcp_client.sh
#
# Writes only under the repository's target/ (the venv in target/mcp-venv, the cargo build) and
# temporary directories (the stores, removed afterwards). pip runs without its cache so that
# nothing lands in $HOME. Exits non-zero on any failure.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

# shellcheck source=tests/venv.sh
. "$repo/tests/venv.sh"
ensure_venv mcp_client.sh "$repo/target/mcp-venv" mcp 2.3.0

# The library's unit tests of the MCP module, then the binary the clients start (the `serve`
# feature includes `mcp`). Both are the builds the other suites use (`serve,replicate`, debug), so
# CI compiles nothing again for them.
cargo test --features serve,replicate --lib mcp::
cargo build --features serve,replicate --bin mnemo

mnemo="$(cargo_target_dir "$repo")/debug/mnemo"
"$repo/target/mcp-venv/bin/python" "$repo/tests/mcp_client.py" --mnemo "$mnemo" --readme "$repo/README.md"
"$repo/target/mcp-venv/bin/python" "$repo/tests/mcp_http_client.py" --mnemo "$mnemo"
# MCP through any node of a three-node fleet (a file:// bucket): forwarded streams, and sessions
# that follow their store to another node.
exec "$repo/target/mcp-venv/bin/python" "$repo/tests/mcp_fleet_client.py" --mnemo "$mnemo"
