package kube

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/kube/podagent"
)

// Config configures the driver.
type Config struct {
	// Client talks to the API server (see NewClient).
	Client kubernetes.Interface
	// Dynamic talks to it about agent-sandbox's objects (NewClients;
	// nil: plain Pods, unless AgentSandbox is "on": an error).
	Dynamic dynamic.Interface
	// AgentSandbox is AgentSandboxAuto ("" too: agent-sandbox's CRDs when
	// the cluster serves them), AgentSandboxOn (required: New fails
	// without them) or AgentSandboxOff (plain Pods). sandbox.go.
	AgentSandbox string
	// Namespace holds the computers' pods, Secrets and NetworkPolicy.
	Namespace string
	// Image is the agent image (docs/fleet.md, deploy/agent.Dockerfile).
	Image string
	// RuntimeClass is the pods' runtimeClassName ("": the cluster's
	// default runtime).
	RuntimeClass string
	// PoolSize is how many ready pods of PoolSpec are kept for creates.
	PoolSize int
	// PoolSpec is the spec of pooled computers (zero: sandbox.DefaultSpec).
	PoolSpec sandbox.Spec
	// ControlPlane are the labels of the control plane's pods, the only
	// pods the NetworkPolicy admits to computers (nil: DefaultControlPlane).
	ControlPlane map[string]string
	// Deployment names this deployment's objects (label
	// cubicle.dev/deployment); every replica of one deployment sets the
	// same ("": "cubicle").
	Deployment string
	// Instance is this replica's id (label cubicle.dev/instance) and
	// Live lists the instances that are alive (their leases hold; nil:
	// only Instance): GC deletes the objects of any other. Both are set
	// by Driver.Start.
	Instance string
	Live     func(ctx context.Context) (map[string]bool, error)
	// GCEvery runs GC in the background this often (0: never; Live
	// should then be nil too).
	GCEvery time.Duration
	// StartTimeout bounds a pod's start to a connected agent (0: 3 min).
	StartTimeout time.Duration
	// Dial connects to a pod's agent (nil: a net.Dialer).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Logger (nil: slog.Default()).
	Logger *slog.Logger
}

// DefaultControlPlane labels the control plane's pods in docs/fleet.md's
// Deployment.
var DefaultControlPlane = map[string]string{"app.kubernetes.io/name": "cubicle"}

// Port is the agent's TCP port in a pod.
const Port = podagent.Port

func (c *Config) defaults() error {
	switch {
	case c.Client == nil:
		return fmt.Errorf("kubernetes driver: no API client")
	case c.Namespace == "":
		return fmt.Errorf("kubernetes driver: no namespace")
	case c.Image == "":
		return fmt.Errorf("kubernetes driver: no agent image (kubernetes.image)")
	case c.PoolSize < 0 || c.PoolSize > 1000:
		return fmt.Errorf("kubernetes driver: pool size %d is not 0 to 1000", c.PoolSize)
	case c.AgentSandbox != "" && c.AgentSandbox != AgentSandboxAuto && c.AgentSandbox != AgentSandboxOn && c.AgentSandbox != AgentSandboxOff:
		return fmt.Errorf("kubernetes driver: agent_sandbox %q is not auto, on or off", c.AgentSandbox)
	}
	if c.ControlPlane == nil {
		c.ControlPlane = DefaultControlPlane
	}
	if c.Deployment == "" {
		c.Deployment = "cubicle"
	}
	if c.StartTimeout <= 0 {
		c.StartTimeout = 3 * time.Minute
	}
	if c.Dial == nil {
		c.Dial = (&net.Dialer{Timeout: 10 * time.Second}).DialContext
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.PoolSpec.MemoryBytes == 0 {
		c.PoolSpec = sandbox.DefaultSpec()
	}
	return nil
}

// NewClient is a client of the API server: from the kubeconfig file at
// path, or in-cluster (the pod's service account) when path is "".
func NewClient(path string) (kubernetes.Interface, error) {
	rc, err := restConfig(path)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(rc)
}

// NewClients is NewClient and the dynamic client of the same API server
// (for agent-sandbox's objects, whose Go types are not a dependency).
func NewClients(path string) (kubernetes.Interface, dynamic.Interface, error) {
	rc, err := restConfig(path)
	if err != nil {
		return nil, nil, err
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, nil, err
	}
	dyn, err := dynamic.NewForConfig(rc)
	return client, dyn, err
}

func restConfig(path string) (*rest.Config, error) {
	var rc *rest.Config
	var err error
	if path == "" {
		rc, err = rest.InClusterConfig()
	} else {
		rc, err = clientcmd.BuildConfigFromFlags("", path)
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	rc.QPS, rc.Burst = 50, 100
	return rc, nil
}
