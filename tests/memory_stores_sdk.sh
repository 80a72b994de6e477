#!/usr/bin/env bash
# Contract test of `mnemo serve --data`'s memory-stores API against the official Python SDK
# (anthropic==2.16.0, `client.beta.memory_stores`): every route the SDK calls, its typed objects,
# pagination and errors. See tests/memory_stores_sdk.py.
#
# Writes only under the repository's target/ (the venv in target/memstores-venv, the cargo build)
# and a temporary directory (the data directory, removed afterwards). Exits non-zero on any failure.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

# shellcheck source=tests/venv.sh
. "$repo/tests/venv.sh"
ensure_venv memory_stores_sdk.sh "$repo/target/memstores-venv" anthropic 2.16.0

cargo build --quiet --features serve,replicate --bin mnemo
mnemo="$(cargo_target_dir "$repo")/debug/mnemo"

exec "$repo/target/memstores-venv/bin/python" "$repo/tests/memory_stores_sdk.py" --mnemo "$mnemo"
