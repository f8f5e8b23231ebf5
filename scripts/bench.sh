#!/usr/bin/env bash
# Measures cubicle's computer start and exec latency against bubblewrap and
# runc on this host and prints the table (docs/benchmarks.md shows one).
#
#   scripts/bench.sh                 # 100 runs per path
#   N=20 scripts/bench.sh --json     # extra arguments go to 'cubicle bench sandbox'
#
# Needs root (computers need namespaces, cgroups and loop devices). Installs
# bubblewrap and runc with apt-get when they are missing, builds
# ./bin/cubicle, and removes its temporary state directory afterwards.
set -euo pipefail

cd "$(dirname "$0")/.."
N="${N:-100}"

if [[ $(id -u) -ne 0 ]]; then
	echo "bench.sh: run as root (computers need namespaces, cgroups and loop devices)" >&2
	exit 1
fi

missing=()
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
command -v runc >/dev/null 2>&1 || missing+=(runc)
if ((${#missing[@]} > 0)); then
	echo "bench.sh: installing ${missing[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

mkdir -p bin
CGO_ENABLED=0 go build -o bin/cubicle ./cmd/cubicle

data="$(mktemp -d /tmp/cubicle-bench-data.XXXXXX)"
cleanup() {
	# The bench removes its computers itself; gc catches what a kill left.
	./bin/cubicle gc --data "$data" >/dev/null 2>&1 || true
	rm -rf --one-file-system "$data"
}
trap cleanup EXIT

./bin/cubicle bench sandbox --n "$N" --data "$data" "$@"
