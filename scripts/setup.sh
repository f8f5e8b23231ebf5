#!/usr/bin/env bash
# Installs what Cubicle needs on a Debian 12 host, idempotently: the Python
# stack that runs inside computers (from Debian, used as /usr/bin/python3),
# mkfs.ext4 for computers' disks, mkfs.erofs for templates' images, and
# the tools the tests use (curl inside internet computers, iproute2 for
# test networks, tmux for the terminal tests of 'cubicle shell', npm for
# scripts/testdeps.sh: Debian's nodejs and npm, unless an npm is already
# on the PATH, e.g. from NodeSource; postgresql-15, whose server the store
# tests start themselves, never as a service).
set -euo pipefail

packages=(
  python3 python3-ipykernel python3-numpy python3-pandas python3-matplotlib
  e2fsprogs util-linux procps iproute2 psmisc gcc libc6-dev
  python3-jupyter-server python3-nbclient python3-nbformat mmdebstrap erofs-utils
  curl ca-certificates tmux postgresql-15
)
command -v npm >/dev/null || packages+=(nodejs npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # The tests run their own PostgreSQL (internal/store/postgres/pgtest):
  # the package must not start or enable a cluster of its own.
  if [[ " ${missing[*]} " == *" postgresql-15 "* ]]; then
    mkdir -p /etc/postgresql-common/createcluster.d
    echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.d/cubicle.conf
  fi
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ "$(id -u)" != 0 ]; then
  echo "setup: cubicle creates namespaces, cgroups and loop devices: run it as root" >&2
fi
[ -e /dev/loop-control ] || modprobe loop 2>/dev/null || echo "setup: warning: no /dev/loop-control (load the loop module)" >&2
echo "setup: ok ($(/usr/bin/python3 -c 'import numpy, pandas, matplotlib, ipykernel; print("python stack present")'))"
