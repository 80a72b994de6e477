# Sourced by the scripts that drive a pinned Python package from PyPI (tests/sdk_differential.sh,
# tests/mcp_client.sh, benches/compare_sdk.sh). pip runs without its cache so that nothing lands
# in $HOME.
#
#   ensure_venv CALLER VENV PACKAGE VERSION   make (or reuse) VENV with PACKAGE==VERSION importable
#   cargo_target_dir REPO                     cargo's target directory ($CARGO_TARGET_DIR, made absolute)

export PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1

venv_holds() {
  [ -x "$1/bin/python" ] && "$1/bin/python" - "$2" "$3" <<'PY' 2>/dev/null
import importlib
import importlib.metadata
import sys
importlib.import_module(sys.argv[1])
sys.exit(0 if importlib.metadata.version(sys.argv[1]) == sys.argv[2] else 1)
PY
}

ensure_venv() {
  local caller="$1" venv="$2" package="$3" version="$4"
  venv_holds "$venv" "$package" "$version" && return 0
  echo "$caller: creating $venv with $package==$version" >&2
  mkdir -p "$(dirname "$venv")"
  python3 -m venv --clear "$venv"
  "$venv/bin/python" -m pip install --quiet "$package==$version"
  venv_holds "$venv" "$package" "$version" || {
    echo "$caller: $package==$version is not importable in $venv" >&2
    exit 2
  }
}

cargo_target_dir() {
  local target_dir="${CARGO_TARGET_DIR:-$1/target}"
  case "$target_dir" in /*) ;; *) target_dir="$1/$target_dir" ;; esac
  echo "$target_dir"
}
