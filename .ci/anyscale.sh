#!/usr/bin/env bash
# The public `anyscale` Python package (SDK and CLI) in a cached venv, for the tests that
# drive Berth's Anyscale scheduler API (/api/v2) with the real client (tests/tests/anyscale.rs).
# Idempotent: an existing venv with the right version is kept.
#   .ci/anyscale.sh install - create the venv if needed
#   .ci/anyscale.sh path    - install if needed, print the venv's directory
set -euo pipefail
ANYSCALE_VERSION=${ANYSCALE_VERSION:-0.26.112}
ANYSCALE_VENV=${BERTH_ANYSCALE_VENV:-$HOME/.cache/berth-anyscale-venv}
say() { printf '\033[1m[anyscale]\033[0m %s\n' "$*" >&2; }

install() {
  if "$ANYSCALE_VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('anyscale') != '$ANYSCALE_VERSION')" 2>/dev/null \
    && [ -x "$ANYSCALE_VENV/bin/anyscale" ]; then
    return
  fi
  say "creating $ANYSCALE_VENV with anyscale==$ANYSCALE_VERSION (about 40 s)"
  rm -rf "$ANYSCALE_VENV"
  python3 -m venv "$ANYSCALE_VENV"
  "$ANYSCALE_VENV/bin/pip" install -q "anyscale==$ANYSCALE_VERSION" >&2
}

case "${1:-install}" in
install) install ;;
path) install; echo "$ANYSCALE_VENV" ;;
*) echo "usage: $0 install|path" >&2; exit 2 ;;
esac
