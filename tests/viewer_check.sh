#!/usr/bin/env bash
# The viewer's modules (src/serve/viewer/*.js) checked without a browser: TypeScript's checker on
# their JSDoc types (`tsc --checkJs --noEmit`, strict; tests/viewer/tsconfig.json) and ESLint's
# recommended rules (tests/viewer/eslint.config.js). Both are pinned by
# tests/viewer/package-lock.json and installed there with npm ci, nothing global.
#
# Writes only tests/viewer/node_modules (ignored by git). Exits non-zero on any type error, lint
# error or lint warning.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

command -v node > /dev/null || { echo "viewer_check.sh: node (20 or newer) is not on PATH" >&2; exit 2; }
(cd tests/viewer && npm ci --no-audit --no-fund --loglevel=error)

bin=tests/viewer/node_modules/.bin
echo "viewer_check.sh: tsc --checkJs --noEmit (strict) over src/serve/viewer/"
"$bin/tsc" --project tests/viewer/tsconfig.json
echo "viewer_check.sh: eslint (recommended rules) over src/serve/viewer/"
# Run from the root with the config named, so that the config's `files` patterns are the
# repository's paths.
"$bin/eslint" --max-warnings 0 --config tests/viewer/eslint.config.js src/serve/viewer/
echo "viewer_check.sh: the viewer's modules are clean"
