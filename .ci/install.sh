#!/usr/bin/env bash
# Installs what Berth's build and tests need and is missing; idempotent, skips what is there.
#   .ci/install.sh run    - enough to build and serve: the wasm target, wasm-bindgen-cli,
#                           wasm-split-cli, the
#                           dashboard's npm packages (ECharts, CodeMirror, esbuild, binaryen)
#   .ci/install.sh test   - plus PostgreSQL, Chromium, Prometheus (Debian), the end2end npm
#                           packages and the Python venvs of Ray, schemathesis and anyscale (PyPI)
#   .ci/install.sh bench  - plus GNU parallel (a peer in the runtime bench)
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-test}
say() { printf '\033[1m[install]\033[0m %s\n' "$*"; }

if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown; then
  say "adding the wasm32-unknown-unknown target"
  rustup target add wasm32-unknown-unknown
fi

# wasm-bindgen-cli must be exactly the version of the wasm-bindgen crate in Cargo.lock.
want=$(grep -A1 '^name = "wasm-bindgen"$' Cargo.lock | sed -n 's/^version = "\(.*\)"/\1/p')
have=$(wasm-bindgen --version 2>/dev/null | awk '{print $2}' || true)
if [ "$have" != "$want" ]; then
  say "installing wasm-bindgen-cli $want (found: ${have:-none}); takes about 2 minutes"
  # Not --locked: its lock pins a crate version this registry does not carry.
  cargo install wasm-bindgen-cli --version "$want"
fi

# wasm-split-cli cuts the dashboard's wasm into the shell and one chunk per group of pages
# (app/src/ui/mod.rs: page_groups!), at the split points the #[lazy] functions mark.
split_want=0.2.4
if ! command -v wasm-split-cli >/dev/null 2>&1 || ! cargo install --list | grep -qx "wasm_split_cli_support v$split_want:"; then
  say "installing wasm-split-cli $split_want; takes about a minute"
  cargo install wasm_split_cli_support --version "$split_want" --features build-binary --locked
fi

# ECharts and CodeMirror, served by the dashboard itself (no CDN), and esbuild and binaryen's
# wasm-opt that build its files (frontend/package.json).
if [ ! -f frontend/node_modules/echarts/dist/echarts.min.js ] || [ ! -x frontend/node_modules/.bin/esbuild ] || [ frontend/package-lock.json -nt frontend/node_modules/.package-lock.json ]; then
  say "installing the dashboard's npm packages (ECharts, CodeMirror, esbuild, wasm-opt)"
  (cd frontend && npm ci --no-audit --no-fund --loglevel=error)
fi

[ "$what" = run ] && exit 0

apt_missing=()
command -v chromium >/dev/null 2>&1 || apt_missing+=(chromium)
command -v curl >/dev/null 2>&1 || apt_missing+=(curl)   # .ci/ray.sh probes Ray with it
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || apt_missing+=(postgresql)
# python3 -m venv (the Ray, schemathesis and anyscale venvs) needs ensurepip, a separate package on Debian.
python3 -c 'import ensurepip' >/dev/null 2>&1 || apt_missing+=(python3-venv)
# GNU parallel: a peer in the runtime bench only.
[ "$what" = bench ] && ! command -v parallel >/dev/null 2>&1 && apt_missing+=(parallel)
if [ ${#apt_missing[@]} -gt 0 ]; then
  say "installing Debian packages: ${apt_missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${apt_missing[@]}" >/dev/null
fi

# requests: seed 001's Python example is run unchanged by the runtime tests.
if ! python3 -c 'import requests' >/dev/null 2>&1; then
  say "installing the Python requests package"
  python3 -m pip install --quiet --user requests 2>/dev/null || python3 -m pip install --quiet --break-system-packages --user requests
fi

# Ray for the Ray backend's tests: a cached venv (ray[default] from PyPI), see .ci/ray.sh.
.ci/ray.sh install

# schemathesis for the API's conformance stage: a cached venv, see .ci/schemathesis.sh.
.ci/schemathesis.sh install

# The anyscale SDK and CLI, driven against /api/v2 by tests/tests/anyscale.rs: a cached venv.
.ci/anyscale.sh install

# Prometheus and promtool (Debian), for the metrics test: see .ci/prometheus.sh.
.ci/prometheus.sh install

if [ ! -d end2end/node_modules/playwright-core ] || [ end2end/package-lock.json -nt end2end/node_modules/.package-lock.json ]; then
  say "installing end2end npm packages"
  (cd end2end && npm ci --no-audit --no-fund --loglevel=error)
fi
