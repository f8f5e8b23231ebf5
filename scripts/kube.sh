#!/usr/bin/env bash
# Builds the Kubernetes control plane the tests run (internal/kubetest):
# kube-apiserver and kube-controller-manager from k8s.io/kubernetes, an etcd
# server from go.etcd.io/etcd/server/v3, and kwok (sigs.k8s.io/kwok), all
# from the Go module proxy, without cgo, into
#   ${CUBICLE_TEST_CACHE:-$HOME/.cache/cubicle-test}/kube/$KUBE_VERSION/bin
# Idempotent: a binary whose version (the stamp file bin/versions, checked
# against the binary's own --version) is current is kept; a cold build takes
# ~16 minutes of 2 idle cores, a warm run seconds. Each build happens in a
# throwaway module under the cache (never in this repository's go.mod).
#   scripts/kube.sh           build what is missing, print the bin directory
#   scripts/kube.sh --check   build nothing: exit 1 if anything is missing
#   scripts/kube.sh --force   rebuild everything
set -euo pipefail

KUBE_VERSION=v1.37.2 # k8s.io/kubernetes; its staging modules are v0.37.2
ETCD_VERSION=v3.7.4  # go.etcd.io/etcd/server/v3 (Debian's etcd 3.4 breaks watches)
KWOK_VERSION=v0.8.0  # sigs.k8s.io/kwok

export PATH=/usr/local/go/bin:$PATH
mode=${1:-build}
case $mode in build | --check | --force) ;; *)
  echo "usage: $0 [--check|--force]" >&2
  exit 2
  ;;
esac

root=${CUBICLE_TEST_CACHE:-$HOME/.cache/cubicle-test}/kube/$KUBE_VERSION
bin=$root/bin
stamp=$bin/versions
gover=$(go env GOVERSION)
mkdir -p "$bin" "$root/src"

# want NAME prints the stamp line a current NAME has.
want() {
  case $1 in
  kube-apiserver | kube-controller-manager) echo "$1 $KUBE_VERSION $gover" ;;
  etcd) echo "$1 $ETCD_VERSION $gover" ;;
  kwok) echo "$1 $KWOK_VERSION $gover" ;;
  esac
}

# reported NAME prints the version the binary itself reports (a binary
# that does not run reports nothing).
reported() {
  local out
  out=$("$bin/$1" --version 2>/dev/null) || return 0 # whole: a head would close the pipe early (SIGPIPE under pipefail)
  case $1 in
  kube-*) sed -n 's/^Kubernetes \(v[0-9.]*\).*/\1/p' <<<"$out" ;;
  etcd) sed -n 's/^etcd Version: \([0-9.]*\).*/v\1/p' <<<"$out" ;;
  kwok) sed -n 's/^kwok version \(v[0-9.]*\) .*/\1/p' <<<"$out" ;;
  esac
}

# current NAME: the binary exists, the stamp says it was built at the
# wanted version with this Go, and it reports that version.
current() {
  [ -x "$bin/$1" ] && grep -qxF "$(want "$1")" "$stamp" 2>/dev/null &&
    [ "$(reported "$1")" = "$(want "$1" | cut -d' ' -f2)" ]
}

names=(etcd kube-apiserver kube-controller-manager kwok)
stale=()
for n in "${names[@]}"; do
  if [ "$mode" = --force ] || ! current "$n"; then stale+=("$n"); fi
done
if ((${#stale[@]} == 0)); then
  echo "$bin"
  exit 0
fi
if [ "$mode" = --check ]; then
  echo "kube.sh: not built or out of date in $bin: ${stale[*]}; run: bash scripts/kube.sh (~16 min cold on 2 cores)" >&2
  exit 1
fi

# One build at a time: make test and a test binary may both call this.
exec 9>"$root/lock"
flock 9
# Another run may have built everything while this one waited.
if [ "$mode" != --force ]; then
  stale=()
  for n in "${names[@]}"; do current "$n" || stale+=("$n"); done
  if ((${#stale[@]} == 0)); then
    echo "$bin"
    exit 0
  fi
fi

export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod GOWORK=off
start=$(date +%s)
log() { echo "kube.sh: [$(($(date +%s) - start))s] $*" >&2; }

# build LABEL COMMAND...: runs a build with a progress line every minute.
build() {
  local label=$1
  shift
  log "building $label"
  "$@" &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    for _ in $(seq 60); do
      sleep 1
      kill -0 "$pid" 2>/dev/null || break
    done
    kill -0 "$pid" 2>/dev/null && log "still building $label"
  done
  wait "$pid" || {
    log "building $label failed"
    exit 1
  }
  log "built $label"
}

# stampit NAME...: records the binaries as current.
stampit() {
  local n tmp
  tmp=$(mktemp "$bin/.versions.XXXXXX")
  for n in "${names[@]}"; do
    if [[ " $* " == *" $n "* ]]; then
      want "$n"
    else
      grep -E "^$n " "$stamp" 2>/dev/null || true
    fi
  done >"$tmp"
  mv "$tmp" "$stamp"
}

# module DIR MODULE VERSION [REPLACES]: a throwaway module requiring MODULE.
module() {
  mkdir -p "$1"
  {
    echo "module cubicle.test/kubebuild"
    echo
    echo "go 1.26"
    echo
    echo "require $2 $3"
    [ -z "${4:-}" ] || printf '\nreplace (\n%s\n)\n' "$4"
  } >"$1/go.mod"
}

if [[ " ${stale[*]} " == *" etcd "* ]]; then
  src=$root/src/etcd
  module "$src" go.etcd.io/etcd/server/v3 "$ETCD_VERSION"
  # The module's root package is etcd's main (etcdmain.Main).
  build "etcd $ETCD_VERSION" sh -c "cd '$src' && go mod download go.etcd.io/etcd/server/v3 && go build -trimpath -o '$bin/etcd.new' go.etcd.io/etcd/server/v3"
  mv "$bin/etcd.new" "$bin/etcd"
  stampit etcd
fi

if [[ " ${stale[*]} " == *" kube-"* ]]; then
  src=$root/src/kubernetes
  log "resolving k8s.io/kubernetes $KUBE_VERSION"
  gomod=$(cd "$root/src" && GOFLAGS= go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
  [ -n "$gomod" ] || {
    log "cannot download k8s.io/kubernetes@$KUBE_VERSION"
    exit 1
  }
  # k8s.io/kubernetes requires its staging modules (k8s.io/api, ...) at
  # v0.0.0 and replaces them with directories the proxy does not serve:
  # each is released as v0.MINOR.PATCH.
  staging=v0.${KUBE_VERSION#v1.}
  replaces=$(awk -v v="$staging" '/^[[:space:]]+k8s\.io\/[a-z0-9-]+ v0\.0\.0([[:space:]]|$)/ { printf "\t%s => %s %s\n", $1, $1, v }' "$gomod")
  [ -n "$replaces" ] || {
    log "found no staging modules in $gomod"
    exit 1
  }
  module "$src" k8s.io/kubernetes "$KUBE_VERSION" "$replaces"
  minor=${KUBE_VERSION#v1.}
  minor=${minor%%.*}
  ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
  build "kube-apiserver and kube-controller-manager $KUBE_VERSION (the long one)" sh -c "cd '$src' && go mod download k8s.io/kubernetes && mkdir -p '$bin/.new' && go build -trimpath -ldflags '$ldflags' -o '$bin/.new/' k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager"
  mv "$bin/.new/kube-apiserver" "$bin/.new/kube-controller-manager" "$bin/"
  rmdir "$bin/.new"
  stampit kube-apiserver kube-controller-manager
fi

if [[ " ${stale[*]} " == *" kwok "* ]]; then
  # kwok's go.mod has no replace directives: go install builds it as
  # released, with its own dependency versions.
  build "kwok $KWOK_VERSION" sh -c "mkdir -p '$bin/.new' && GOFLAGS= GOBIN='$bin/.new' go install -trimpath -ldflags '-s -w' 'sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION'"
  mv "$bin/.new/kwok" "$bin/kwok"
  rmdir "$bin/.new"
  stampit kwok
fi

for n in "${names[@]}"; do
  current "$n" || {
    log "$n does not report version $(want "$n" | cut -d' ' -f2) after its build: $("$bin/$n" --version 2>&1 | head -n 2)"
    exit 1
  }
done
log "done: ${names[*]} in $bin"
echo "$bin"
