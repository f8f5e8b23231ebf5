#!/usr/bin/env bash
# Measures cubicle's computer start and exec latency against bubblewrap and
# runc ('cubicle bench sandbox'), then the computers API over HTTP next to
# the same operations on the driver ('cubicle bench api'), and prints both
# tables (docs/benchmarks.md shows them).
#
#   scripts/bench.sh                    # both: 100 sandbox runs, 200 API runs, load 50 × 100
#   N=20 API_N=50 scripts/bench.sh      # fewer runs
#   CONCURRENCY=20 EXECS=50 scripts/bench.sh
#   BENCH=api scripts/bench.sh --json   # only one of them (sandbox or api)
#
# Extra arguments go to every bench that runs, so with both only flags they
# share make sense (--json, --timeout); with --json each prints its own JSON
# document, one after the other.
#
# Needs root (computers need namespaces, cgroups and loop devices). Installs
# bubblewrap and runc with apt-get when they are missing, builds
# ./bin/cubicle, and removes its temporary state directory afterwards (also
# what a killed run left in it). Safe to run again.
set -euo pipefail

cd "$(dirname "$0")/.."
N="${N:-100}"
API_N="${API_N:-200}"
CONCURRENCY="${CONCURRENCY:-50}"
EXECS="${EXECS:-100}"
BENCH="${BENCH:-all}"

case "$BENCH" in
all | sandbox | api) ;;
*)
	echo "bench.sh: BENCH must be all, sandbox or api, got '$BENCH'" >&2
	exit 2
	;;
esac
if [[ $(id -u) -ne 0 ]]; then
	echo "bench.sh: run as root (computers need namespaces, cgroups and loop devices)" >&2
	exit 1
fi

if [[ $BENCH != api ]]; then
	missing=()
	command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
	command -v runc >/dev/null 2>&1 || missing+=(runc)
	if ((${#missing[@]} > 0)); then
		echo "bench.sh: installing ${missing[*]}" >&2
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq
		apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	fi
fi

mkdir -p bin
CGO_ENABLED=0 go build -o bin/cubicle ./cmd/cubicle

data="$(mktemp -d /tmp/cubicle-bench-data.XXXXXX)"
cleanup() {
	# The benches remove what they make themselves; gc catches what a kill
	# left: in-process computers of 'bench sandbox' (in $data) and of 'bench
	# api' (its sandbox/ directory), and a killed server's (its serve/).
	local d
	for d in "$data" "$data"/cubicle-bench-api-*/sandbox "$data"/cubicle-bench-api-*/serve; do
		[[ -d $d ]] && ./bin/cubicle gc --data "$d" >/dev/null 2>&1 || true
	done
	rm -rf --one-file-system "$data"
}
trap cleanup EXIT

status=0
if [[ $BENCH != api ]]; then
	./bin/cubicle bench sandbox --n "$N" --data "$data" "$@" || status=$?
	if ((status == 130)); then # interrupted: do not start the next one
		exit 130
	fi
fi
if [[ $BENCH == all ]]; then
	echo
fi
if [[ $BENCH != sandbox ]]; then
	./bin/cubicle bench api --n "$API_N" --concurrency "$CONCURRENCY" --execs "$EXECS" --data "$data" "$@" || status=$?
fi
exit "$status"
