#!/usr/bin/env bash
# Installs the npm clients the tests drive (e.g. the AI SDK in
# internal/httpapi/testdata/aisdk), pinned by their lockfiles, from the npm
# registry; idempotent: a directory whose node_modules matches its lockfile
# is left alone.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v npm >/dev/null || { echo "testdeps: npm is required: run scripts/setup.sh (it installs Debian's nodejs and npm)" >&2; exit 1; }
for lock in internal/*/testdata/*/package-lock.json; do
  dir=$(dirname "$lock")
  if [ -f "$dir/node_modules/.package-lock.json" ] && [ "$dir/node_modules/.package-lock.json" -nt "$lock" ]; then
    continue
  fi
  echo "testdeps: npm ci in $dir"
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
done
