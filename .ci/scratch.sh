#!/usr/bin/env bash
# The temporary directory of one `make test` run, printed: the test stages run with TMPDIR
# set to it, so the databases, data dirs and logs the tests make are all in one place.
# `make test` removes it when every stage passed and keeps it for reading when one failed;
# here, those of earlier runs whose owner (OWNER_PID, the recipe's shell) is gone are removed.
set -euo pipefail
root=${TMPDIR:-/tmp}
for old in "$root"/berth-make-test.*; do
  [ -d "$old" ] || continue
  pid=${old##*.}
  [[ $pid =~ ^[0-9]+$ ]] && [ -e "/proc/$pid" ] || rm -rf "$old"
done
dir="$root/berth-make-test.${1:?usage: scratch.sh OWNER_PID}"
mkdir -p "$dir"
echo "$dir"
