#!/usr/bin/env bash
# The viewer (`mnemo serve`'s /ui/) in a real browser: Debian's chromium, driven by playwright-core
# (pinned by tests/viewer/package-lock.json; never a browser download), with Node's test runner.
# See tests/viewer/viewer.test.mjs. Screenshots of each page go to target/viewer-screenshots/.
#
# Installs what it needs: chromium with apt-get when /usr/bin/chromium is missing (CI runs as
# root on a fresh Debian machine), playwright-core with npm ci. Without a browser it skips, but
# under CI=true that is a failure. Writes only under the repository (tests/viewer/node_modules,
# ignored by git; target/) and temporary directories the test removes. Exits non-zero on any
# failure.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

# shellcheck source=tests/venv.sh
. "$repo/tests/venv.sh"

chromium="${CHROMIUM:-/usr/bin/chromium}"
if [ ! -x "$chromium" ] && [ "$chromium" = /usr/bin/chromium ] && [ "$(id -u)" = 0 ] \
    && command -v apt-get > /dev/null; then
    apt-get update -q && apt-get install -qy --no-install-recommends chromium
fi
if [ ! -x "$chromium" ]; then
    if [ "${CI:-}" = true ]; then
        echo "viewer.sh: no browser at $chromium (install Debian's chromium); under CI=true this fails" >&2
        exit 2
    fi
    echo "viewer.sh: skipped: no browser at $chromium (apt-get install chromium, or set CHROMIUM)" >&2
    exit 0
fi
command -v node > /dev/null || { echo "viewer.sh: node (20 or newer) is not on PATH" >&2; exit 2; }
(cd tests/viewer && npm ci --no-audit --no-fund --loglevel=error)

target="$(cargo_target_dir "$repo")"
cargo build --quiet --bin mnemo
# The tampered store: made by the Rust test that checks it (it changes event 2 below the API).
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
MNEMO_VIEWER_TAMPERED="$work/tampered.mnemo.db" cargo test --quiet --test integration -- \
    --exact serve::viewer::a_viewer_session_sees_verify_name_the_first_tampered_event > /dev/null

MNEMO_BIN="$target/debug/mnemo" \
MNEMO_VIEWER_TAMPERED="$work/tampered.mnemo.db" \
MNEMO_SCREENSHOTS="$target/viewer-screenshots" \
CHROMIUM="$chromium" \
    node --test --test-concurrency=1 tests/viewer/
