#!/usr/bin/env bash
# Builds the web console's third-party files (internal/console/static/vendor)
# from the npm packages pinned by internal/console/assets/package-lock.json:
# `npm ci` there (the lockfile's versions and integrity hashes), then a
# byte-for-byte copy of the files listed below and a MANIFEST of each file's
# sha256, package, version and source path. The result is committed, so
# `make build` and `make run` need no npm; TestVendoredAssets (internal/console)
# checks the committed files against the MANIFEST, the lockfile and the
# installed packages.
#
#   scripts/console-assets.sh          rebuild static/vendor
#   scripts/console-assets.sh --check  fail if the committed files differ from a fresh build
set -euo pipefail
cd "$(dirname "$0")/.."
assets=internal/console/assets
vendor=internal/console/static/vendor

# package, file in the package, file under static/vendor
files=(
  "@xterm/xterm lib/xterm.mjs xterm/xterm.mjs"
  "@xterm/xterm css/xterm.css xterm/xterm.css"
  "@xterm/xterm LICENSE xterm/LICENSE"
  "@xterm/addon-fit lib/addon-fit.mjs xterm/addon-fit.mjs"
  "@xterm/addon-fit LICENSE xterm/addon-fit.LICENSE"
)

command -v npm >/dev/null || { echo "console-assets: npm is required: run scripts/setup.sh (it installs Debian's nodejs and npm)" >&2; exit 1; }
(cd "$assets" && npm ci --no-audit --no-fund --loglevel=error)

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
manifest="$out/MANIFEST"
echo "# Built by scripts/console-assets.sh from $assets/package-lock.json; do not edit." >"$manifest"
echo "# sha256  file  package@version  source" >>"$manifest"
for f in "${files[@]}"; do
  read -r pkg src dst <<<"$f"
  version=$(node -p "require('./$assets/node_modules/$pkg/package.json').version")
  mkdir -p "$(dirname "$out/$dst")"
  cp "$assets/node_modules/$pkg/$src" "$out/$dst"
  echo "$(sha256sum "$out/$dst" | cut -d' ' -f1)  $dst  $pkg@$version  $src" >>"$manifest"
done

if [ "${1:-}" = --check ]; then
  if ! diff -r "$out" "$vendor" >/dev/null; then
    diff -r "$out" "$vendor" | head -20 >&2
    echo "console-assets: $vendor differs from a build of $assets/package-lock.json: run scripts/console-assets.sh and commit" >&2
    exit 1
  fi
  echo "console-assets: $vendor matches the lockfile's build"
  exit 0
fi
rm -rf "$vendor"
mkdir -p "$vendor"
cp -r "$out"/. "$vendor"/
echo "console-assets: wrote $vendor ($(( ${#files[@]} )) files and MANIFEST)"
