#!/usr/bin/env bash
# A real Prometheus server and promtool, from Debian's `prometheus` package: the metrics test
# (tests/tests/metrics.rs) lints /metrics with `promtool check metrics` and scrapes Berth with
# the server. Idempotent: installs only when one of the two is missing.
#   .ci/prometheus.sh install   - install if missing
#   .ci/prometheus.sh path      - install if missing, print the prometheus binary's path
set -euo pipefail
install() {
  if command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; then
    return 0
  fi
  printf '\033[1m[install]\033[0m %s\n' "installing Prometheus and promtool (Debian package prometheus)" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  # The package's service is not started here (no systemd); the test runs its own server.
  if ! DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends prometheus >/dev/null; then
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  fi
}
case "${1:-install}" in
install) install ;;
path) install; command -v prometheus ;;
*) echo "usage: $0 install|path" >&2; exit 2 ;;
esac
