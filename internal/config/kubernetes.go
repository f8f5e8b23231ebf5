package config

import (
	"regexp"
	"strings"
	"time"
)

// Drivers: what computers.driver may name.
const (
	DriverLinux      = "linux"      // computers on this host (the default)
	DriverKubernetes = "kubernetes" // computers as Pods ([kubernetes], docs/fleet.md)
)

// Kubernetes configures the kubernetes driver (computers.driver =
// "kubernetes"): each computer is a Pod of the agent image.
type Kubernetes struct {
	// Kubeconfig is a kubeconfig file; "": in-cluster (the server's pod's
	// service account).
	Kubeconfig string `toml:"kubeconfig"`
	// Namespace holds the computers' pods, their Secrets and the
	// NetworkPolicy.
	Namespace string `toml:"namespace"`
	// Image is the agent image (deploy/agent.Dockerfile); required.
	Image string `toml:"image"`
	// RuntimeClass is the pods' runtimeClassName (gvisor, kata); "": the
	// cluster's default runtime.
	RuntimeClass string `toml:"runtime_class"`
	// ControlPlaneSelector labels the server's own pods ("k=v,k2=v2"): the
	// only pods the NetworkPolicy lets reach a computer's agent.
	ControlPlaneSelector string `toml:"control_plane_selector"`
	// Deployment names this deployment's objects (the same on every
	// replica; several deployments may share a namespace).
	Deployment string `toml:"deployment"`
	// StartTimeoutSeconds bounds a pod's start, from its creation to its
	// agent's answer.
	StartTimeoutSeconds int `toml:"start_timeout_seconds"`
	// GCSeconds is how often the pods of replicas that are gone are
	// deleted.
	GCSeconds int `toml:"gc_seconds"`
	// AgentSandbox says whether computers are agent-sandbox's
	// SandboxClaims: "auto" (where the cluster serves its CRDs), "on"
	// (required: the server does not start without them) or "off" (plain
	// Pods). docs/fleet.md.
	AgentSandbox string `toml:"agent_sandbox"`
}

// AgentSandbox modes.
const (
	AgentSandboxAuto = "auto"
	AgentSandboxOn   = "on"
	AgentSandboxOff  = "off"
)

// DefaultKubernetes is the [kubernetes] block's defaults.
func DefaultKubernetes() Kubernetes {
	return Kubernetes{Namespace: "cubicle", ControlPlaneSelector: "app.kubernetes.io/name=cubicle",
		Deployment: "cubicle", StartTimeoutSeconds: 180, GCSeconds: 60, AgentSandbox: AgentSandboxAuto}
}

// StartTimeout is start_timeout_seconds.
func (k Kubernetes) StartTimeout() time.Duration { return seconds(k.StartTimeoutSeconds) }

// GCEvery is gc_seconds.
func (k Kubernetes) GCEvery() time.Duration { return seconds(k.GCSeconds) }

// dnsLabel is a Kubernetes name (RFC 1123 label).
var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// labelPart is a label key's name or a label value.
var labelPart = regexp.MustCompile(`^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$`)

// Selector parses control_plane_selector.
func (k Kubernetes) Selector() (map[string]string, error) {
	m := map[string]string{}
	for _, kv := range strings.Split(k.ControlPlaneSelector, ",") {
		key, val, ok := strings.Cut(strings.TrimSpace(kv), "=")
		name := key[strings.LastIndexByte(key, '/')+1:]
		if !ok || name == "" || !labelPart.MatchString(name) || !labelPart.MatchString(val) || len(key) > 316 {
			return nil, invalid("kubernetes.control_plane_selector", "%q is not key=value[,key=value]", k.ControlPlaneSelector)
		}
		m[key] = val
	}
	return m, nil
}

// validate checks the block when the driver is kubernetes.
func (k Kubernetes) validate(driver string) error {
	if driver != DriverKubernetes {
		return nil
	}
	switch {
	case k.Image == "":
		return invalid("kubernetes.image", "the agent image is required with computers.driver = %q", DriverKubernetes)
	case strings.ContainsAny(k.Image, " \t\n"):
		return invalid("kubernetes.image", "%q is not an image reference", k.Image)
	case !dnsLabel.MatchString(k.Namespace):
		return invalid("kubernetes.namespace", "%q is not a namespace name", k.Namespace)
	case k.RuntimeClass != "" && !dnsLabel.MatchString(k.RuntimeClass):
		return invalid("kubernetes.runtime_class", "%q is not a RuntimeClass name", k.RuntimeClass)
	case !dnsLabel.MatchString(k.Deployment) || len(k.Deployment) > 40:
		return invalid("kubernetes.deployment", "%q is not a name of at most 40 lowercase letters, digits and hyphens", k.Deployment)
	case k.StartTimeoutSeconds < 0:
		return invalid("kubernetes.start_timeout_seconds", "must be 0 (the default) or positive")
	case k.GCSeconds < 0:
		return invalid("kubernetes.gc_seconds", "must be 0 (the default) or positive")
	case k.AgentSandbox != AgentSandboxAuto && k.AgentSandbox != AgentSandboxOn && k.AgentSandbox != AgentSandboxOff:
		return invalid("kubernetes.agent_sandbox", "must be %q, %q or %q, got %q", AgentSandboxAuto, AgentSandboxOn, AgentSandboxOff, k.AgentSandbox)
	}
	_, err := k.Selector()
	return err
}

// validateDriver checks computers.driver.
func (c Computers) validateDriver() error {
	if c.Driver != DriverLinux && c.Driver != DriverKubernetes {
		return invalid("computers.driver", "must be %q or %q, got %q", DriverLinux, DriverKubernetes, c.Driver)
	}
	return nil
}
