// Package podtest runs a pod's agent (`cubicle agent --pod`) on this host
// as a test's node would run the pod's container: in mount and PID
// namespaces of its own, with a fresh /workspace owned by the sandbox
// user and the pod's TLS files, optionally in a network namespace (a
// kubetest node hook's: Kubelet plays the node for the driver's pods).
// For tests only.
//
// It may import internal/sandbox/kube/podagent, internal/kubetest,
// client-go and the standard library.
package podtest
