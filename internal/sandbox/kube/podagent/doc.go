// Package podagent is a computer's agent when the computer is a Kubernetes
// Pod (internal/sandbox/kube): `cubicle agent --pod`, the container's
// command in the agent image. It serves the same control protocol as the
// Linux driver's agent (internal/agent's Server) on a TCP port, over TLS
// 1.3 with both sides authenticated by pinned certificates: the pod's own
// key pair and the control plane's client certificate(s), files of the
// per-pod Secret the driver creates and mounts (identity.go makes and
// checks them; both sides use it).
//
// A pod's agent builds no namespaces, cgroups or seccomp filter: isolation
// is the container runtime's (a RuntimeClass such as gVisor or Kata, the
// pod's non-root user, dropped capabilities, RuntimeDefault seccomp). User
// code runs as the pod's user. The agent accepts exactly one authenticated
// control connection for its whole life and exits when it ends; it keeps
// its listening socket open until then (refusing every other connection),
// so no process of the computer can take the port.
//
// It may import internal/agent, internal/agent/protocol, x/sys and the
// standard library.
package podagent
