#!/usr/bin/env bash
# Contract test of `mnemo serve --data`'s memory-stores API against the official Python SDK
# (`client.beta.memory_stores`): every route the SDK calls, its typed objects, pagination and
# errors, and the SDK's SessionMemoryStores on top of it. See tests/memory_stores_sdk.py.
#
#   bash tests/memory_stores_sdk.sh [VERSION]   anthropic==VERSION: 2.16.0 (the default) or 2.17.0
#
# On 2.17.0 it also drives the SDK's write-through of memory-file writes
# (SessionMemoryStores.write_file) against the server, a dropped answer and a stopped server
# included.
#
# Writes only under the repository's target/ (the venv in target/memstores-venv-VERSION, the
# cargo build) and a temporary directory (the data directory, removed afterwards). Exits non-zero
# on any failure.
set -euo pipefail

version="${1:-2.16.0}"
case "$version" in
  2.16.0 | 2.17.0) ;;
  *) echo "memory_stores_sdk.sh: anthropic $version is not one this test is pinned to (2.16.0, 2.17.0)" >&2; exit 2 ;;
esac

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

# shellcheck source=tests/venv.sh
. "$repo/tests/venv.sh"
venv="$repo/target/memstores-venv-$version"
ensure_venv memory_stores_sdk.sh "$venv" anthropic "$version"

cargo build --quiet --features serve,replicate --bin mnemo
mnemo="$(cargo_target_dir "$repo")/debug/mnemo"

exec "$venv/bin/python" "$repo/tests/memory_stores_sdk.py" --mnemo "$mnemo" --sdk "$version"
