#!/usr/bin/env bash
# Measures cubicle's computer start and exec latency against bubblewrap and
# runc ('cubicle-bench sandbox'), then the computers API over HTTP next to
# the same operations on the driver ('cubicle-bench api'), then Python in
# computers next to jupyter_server ('cubicle-bench python'), then the
# Responses gateway with a zero-latency upstream ('cubicle-bench gateway'),
# then internet computers' connect, download and start next to the host in
# a test internet of their own ('cubicle-bench net'), and prints the tables
# (docs/benchmarks.md shows them).
#
#   scripts/bench.sh                    # all: 100 sandbox runs, 200 API runs, load 50 × 100,
#                                       # 100 Python round trips and 30 first cells
#   N=20 API_N=50 PY_N=50 PY_FIRST_N=10 scripts/bench.sh   # fewer runs
#   CONCURRENCY=20 EXECS=50 scripts/bench.sh
#   GW_N=50 GW_CONCURRENCY=20 GW_BATCHES=3 BENCH=gateway scripts/bench.sh
#   NET_N=100 NET_DOWNLOADS=20 BENCH=net scripts/bench.sh
#   BENCH=python scripts/bench.sh --json   # only one of them (sandbox, api, python, gateway or net)
#
# Extra arguments go to every bench that runs, so with more than one only
# flags they share make sense (--json, --timeout); with --json each prints
# its own JSON document, one after the other.
#
# Needs root (computers need namespaces, cgroups and loop devices). Installs
# bubblewrap and runc (sandbox) and python3-jupyter-server (python) with
# apt-get when they are missing (running apt-get update only then), builds
# ./bin/cubicle and ./bin/cubicle-bench, and removes its temporary state
# directory afterwards (also what a killed run left in it). Safe to run
# again.
set -euo pipefail

cd "$(dirname "$0")/.."
N="${N:-100}"
API_N="${API_N:-200}"
CONCURRENCY="${CONCURRENCY:-50}"
EXECS="${EXECS:-100}"
PY_N="${PY_N:-100}"
PY_FIRST_N="${PY_FIRST_N:-30}"
GW_N="${GW_N:-50}"
GW_CONCURRENCY="${GW_CONCURRENCY:-20}"
GW_BATCHES="${GW_BATCHES:-3}"
NET_N="${NET_N:-100}"
NET_DOWNLOADS="${NET_DOWNLOADS:-20}"
BENCH="${BENCH:-all}"

case "$BENCH" in
all | sandbox | api | python | gateway | net) ;;
*)
	echo "bench.sh: BENCH must be all, sandbox, api, python, gateway or net, got '$BENCH'" >&2
	exit 2
	;;
esac
if [[ $(id -u) -ne 0 ]]; then
	echo "bench.sh: run as root (computers need namespaces, cgroups and loop devices)" >&2
	exit 1
fi

missing=()
if [[ $BENCH == all || $BENCH == sandbox ]]; then
	command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
	command -v runc >/dev/null 2>&1 || missing+=(runc)
fi
if [[ $BENCH == all || $BENCH == python ]]; then
	# The peer of 'bench python' (Debian's jupyter_server 1.23 and the
	# ipykernel both sides run).
	/usr/bin/python3 -c 'import jupyter_server, ipykernel' >/dev/null 2>&1 ||
		missing+=(python3-jupyter-server python3-ipykernel)
fi
if ((${#missing[@]} > 0)); then
	echo "bench.sh: installing ${missing[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

mkdir -p bin
CGO_ENABLED=0 go build -o bin/cubicle ./cmd/cubicle
CGO_ENABLED=0 go build -o bin/cubicle-bench ./cmd/cubicle-bench

data="$(mktemp -d /tmp/cubicle-bench-data.XXXXXX)"
cleanup() {
	# The benches remove what they make themselves; gc catches what a kill
	# left: in-process computers of 'bench sandbox' (in $data) and of 'bench
	# api' and 'bench python' (their sandbox/ directories), and a killed
	# server's (serve/ of 'bench api', warm/ and cold/ of 'bench python',
	# server/ of 'bench gateway').
	local d
	for d in "$data" "$data"/cubicle-bench-{api,python}-*/sandbox "$data"/cubicle-bench-api-*/serve \
		"$data"/cubicle-bench-python-*/{warm,cold} "$data"/cubicle-bench-gateway-*/server; do
		[[ -d $d ]] && ./bin/cubicle gc --data "$d" >/dev/null 2>&1 || true
	done
	rm -rf --one-file-system "$data"
}
trap cleanup EXIT

status=0
run() { # run BENCH ARGS...: one bench; stop everything when it was interrupted
	local rc=0
	./bin/cubicle-bench "$@" || rc=$? # it runs the ./bin/cubicle next to it
	if ((rc == 130)); then
		exit 130
	fi
	if ((rc != 0)); then
		status=$rc
	fi
}
if [[ $BENCH == all || $BENCH == sandbox ]]; then
	run sandbox --n "$N" --data "$data" "$@"
fi
if [[ $BENCH == all ]]; then
	echo
fi
if [[ $BENCH == all || $BENCH == api ]]; then
	run api --n "$API_N" --concurrency "$CONCURRENCY" --execs "$EXECS" --data "$data" "$@"
fi
if [[ $BENCH == all ]]; then
	echo
fi
if [[ $BENCH == all || $BENCH == python ]]; then
	run python --n "$PY_N" --first-n "$PY_FIRST_N" --data "$data" "$@"
fi
if [[ $BENCH == all ]]; then
	echo
fi
if [[ $BENCH == all || $BENCH == gateway ]]; then
	run gateway --n "$GW_N" --concurrency "$GW_CONCURRENCY" --batches "$GW_BATCHES" --data "$data" "$@"
fi
if [[ $BENCH == all ]]; then
	echo
fi
if [[ $BENCH == all || $BENCH == net ]]; then
	run net --n "$NET_N" --downloads "$NET_DOWNLOADS" --data "$data" "$@"
fi
exit "$status"
