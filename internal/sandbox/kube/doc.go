// Package kube is the Kubernetes driver: each computer is a Pod of the
// agent image (cmd/cubicle's `cubicle agent --pod`, podagent), in one
// namespace, with a configurable RuntimeClass (gVisor, Kata), requests and
// limits from the Spec, no service-account token, no service links, a
// non-root user, every capability dropped, no privilege escalation and
// seccomp RuntimeDefault. A NetworkPolicy made once per namespace admits
// only the control plane's pods, on the agent's port, and no egress.
//
// The control channel is TCP with mutual TLS 1.3: per computer the driver
// makes the pod's key pair, stores it with the control plane's client
// certificate in a Secret the pod mounts (owned by the pod, so deleted with
// it), pins the pod's certificate and speaks internal/agent's protocol with
// the unchanged agent.Client. The control plane's client identity is one
// per deployment, in a Secret every replica reads (identity.go).
//
// A warm pool of ready pods (Config.PoolSize, pool.go) is claimed by
// relabelling. GC (gc.go) deletes the pods and Secrets of this deployment
// whose replica (label cubicle.dev/instance) is no longer alive.
//
// Where the cluster serves kubernetes-sigs/agent-sandbox's CRDs
// (Config.AgentSandbox, sandbox.go, claim.go), computers of the pool's
// shape are SandboxClaims on the deployment's SandboxWarmPool of one
// SandboxTemplate, through the dynamic client; their pods make their own
// key pair (an init container) and the driver pins the fingerprint their
// kubelet publishes in the pod's status.
// docs/fleet.md has the manifests, the RBAC verbs and the decisions.
//
// It may import internal/sandbox, internal/agent,
// internal/agent/protocol, internal/errdefs, its own subpackages
// (podagent) and k8s.io's client-go, api and apimachinery.
package kube
