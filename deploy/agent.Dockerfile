# The agent image of the kubernetes driver (docs/fleet.md): a computer is a
# Pod of this image, whose command is `cubicle agent --pod`. Build from the
# repository's root after `make build`:
#
#   docker build -f deploy/agent.Dockerfile -t registry.example/cubicle-agent:VERSION .
#
# The same image serves as the control plane's (`cubicle serve`): one
# binary.
FROM debian:12-slim

# What a computer on the Linux driver finds on the host (scripts/setup.sh):
# Python with ipykernel and the scientific stack, and the usual tools.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      python3 python3-ipykernel python3-numpy python3-pandas python3-matplotlib \
      ca-certificates coreutils procps \
 && rm -rf /var/lib/apt/lists/*

# The sandbox user (uid and gid 1000) is the pod's user: runAsUser 1000,
# runAsNonRoot. /workspace, /tmp and the TLS directory are volumes.
RUN groupadd --gid 1000 user && useradd --uid 1000 --gid 1000 --home-dir /workspace --no-create-home user \
 && mkdir -p /workspace /run/cubicle/tls && chown 1000:1000 /workspace

COPY bin/cubicle /usr/local/bin/cubicle

USER 1000:1000
WORKDIR /workspace
EXPOSE 7811
ENTRYPOINT ["/usr/local/bin/cubicle", "agent", "--pod"]
