#!/usr/bin/env bash
# Installs the npm clients the tests drive (e.g. the AI SDK in
# internal/httpapi/testdata/aisdk, playwright-core in
# internal/console/testdata/e2e), pinned by their lockfiles, from the npm
# registry, and the packages the web console's vendored files come from
# (internal/console/assets, checked by TestVendoredAssets); idempotent: a
# directory whose node_modules matches its lockfile is left alone. Also
# Debian's chromium, the browser of the console's end-to-end test. Last,
# the Kubernetes control plane of internal/kubetest (scripts/kube.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v npm >/dev/null || { echo "testdeps: npm is required: run scripts/setup.sh (it installs Debian's nodejs and npm)" >&2; exit 1; }
if ! dpkg-query -W -f='${Status}' chromium 2>/dev/null | grep -q "install ok installed"; then
  echo "testdeps: installing chromium"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi
for lock in internal/*/testdata/*/package-lock.json internal/console/assets/package-lock.json; do
  dir=$(dirname "$lock")
  if [ -f "$dir/node_modules/.package-lock.json" ] && [ "$dir/node_modules/.package-lock.json" -nt "$lock" ]; then
    continue
  fi
  echo "testdeps: npm ci in $dir"
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
done
# The Kubernetes control plane internal/kubetest runs (kube-apiserver,
# kube-controller-manager, etcd, kwok), built from the Go module proxy and
# cached: ~16 minutes cold on 2 cores, seconds after.
bash scripts/kube.sh >/dev/null
