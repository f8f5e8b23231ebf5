package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cubicle-sandbox/cubicle/internal/agent"
	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/kube/podagent"
)

// Driver creates computers as Pods.
type Driver struct {
	cfg    Config
	client podagent.Identity // the control plane's, shared by the deployment's replicas
	log    *slog.Logger

	mu       sync.Mutex
	running  map[string]*computer // this replica's computers, pooled ones too
	pool     chan *computer       // ready pods of cfg.PoolSpec (pool.go)
	wake     chan struct{}
	stop     context.CancelFunc
	bg       sync.WaitGroup
	startErr error // why Start has not run

	sandboxes bool       // computers of the pool's shape are agent-sandbox's (sandbox.go)
	sbMu      sync.Mutex // held while the SandboxTemplate and SandboxWarmPool are made
	sbReady   bool       // they are
}

var (
	_ sandbox.Driver = (*Driver)(nil)
	_ sandbox.Closer = (*Driver)(nil)
	_ sandbox.Named  = (*Driver)(nil)
)

// DriverName names the driver in the refusals of what it lacks (pause,
// volumes).
func (d *Driver) DriverName() string { return "kubernetes" }

var errNotStarted = errors.New("kubernetes driver: Start was not called")

// New checks the API server and prepares the namespace: the control
// plane's client identity (made once per deployment), the NetworkPolicy
// and, where agent-sandbox's API is served (Config.AgentSandbox), the
// Secret of the control plane's certificate its pods mount. Start must
// follow before computers are created.
func New(ctx context.Context, cfg Config) (*Driver, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	d := &Driver{cfg: cfg, log: cfg.Logger, running: map[string]*computer{}, startErr: errNotStarted,
		pool: make(chan *computer, cfg.PoolSize), wake: make(chan struct{}, 1)}
	if err := d.chooseAgentSandbox(); err != nil {
		return nil, unavailable("kubernetes driver: %w", err)
	}
	var err error
	if d.client, err = d.loadClientIdentity(ctx); err != nil {
		return nil, unavailable("kubernetes driver: %w", err)
	}
	if err := d.ensurePolicy(ctx); err != nil {
		return nil, unavailable("kubernetes driver: %w", err)
	}
	if d.sandboxes {
		if err := d.ensureTrust(ctx); err != nil {
			return nil, unavailable("kubernetes driver: %w", err)
		}
	}
	return d, nil
}

// AgentSandbox reports whether computers of the pool's shape are
// agent-sandbox's SandboxClaims (decided at New).
func (d *Driver) AgentSandbox() bool { return d.sandboxes }

// Start names the replica that owns the driver's pods (instance, label
// cubicle.dev/instance), how to tell which replicas are alive (live; nil:
// only this one) and the pooled computers' spec (zero: Config.PoolSpec),
// then starts the warm pool (with agent-sandbox: makes its SandboxTemplate
// and SandboxWarmPool) and the background GC.
func (d *Driver) Start(instance string, live func(ctx context.Context) (map[string]bool, error), poolSpec sandbox.Spec) {
	ctx, cancel := context.WithCancel(context.Background())
	d.mu.Lock()
	d.cfg.Instance, d.cfg.Live, d.stop, d.startErr = instance, live, cancel, nil
	if poolSpec.MemoryBytes > 0 {
		d.cfg.PoolSpec = poolSpec
	}
	d.mu.Unlock()
	switch {
	case d.sandboxes:
		d.bg.Add(1)
		go d.keepSandboxObjects(ctx)
	case d.cfg.PoolSize > 0:
		d.bg.Add(1)
		go d.refill(ctx)
	}
	if d.cfg.GCEvery > 0 {
		d.bg.Add(1)
		go d.gcLoop(ctx)
	}
}

// Close stops the pool and the GC and destroys the pooled computers (the
// owner destroyed the others before).
func (d *Driver) Close(ctx context.Context) error {
	d.mu.Lock()
	stop := d.stop
	d.mu.Unlock()
	if stop != nil {
		stop()
	}
	d.bg.Wait()
	for {
		select {
		case c := <-d.pool:
			c.Destroy(ctx)
		default:
			return ctx.Err()
		}
	}
}

// Create starts a computer: with agent-sandbox, a SandboxClaim when spec
// has the pool's shape; else a pooled pod when spec is the pool's, else a
// new pod.
func (d *Driver) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if spec.Network == "" {
		spec.Network = sandbox.NetworkNone
	}
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if err := unsupported(spec); err != nil {
		return nil, err
	}
	d.mu.Lock()
	err := d.startErr
	d.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if d.sandboxes && d.sandboxShape(spec) {
		return d.startClaimed(ctx, sandbox.NewID(), spec)
	}
	if c := d.claim(ctx, spec); c != nil {
		return c, nil
	}
	return d.start(ctx, sandbox.NewID(), spec, stateClaimed)
}

// start makes computer id's pod and Secret, waits for the pod to run and
// connects to its agent. A failed start deletes what it made.
func (d *Driver) start(ctx context.Context, id string, spec sandbox.Spec, state string) (*computer, error) {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.StartTimeout)
	defer cancel()
	server, err := podagent.NewIdentity(podName(id), identityValidity)
	if err != nil {
		return nil, err
	}
	fp, err := server.Fingerprint()
	if err != nil {
		return nil, err
	}
	pod, err := d.cfg.Client.CoreV1().Pods(d.cfg.Namespace).Create(ctx, d.pod(id, state, fp, spec), metav1.CreateOptions{})
	if err != nil {
		return nil, unavailable("start computer: create pod: %w", err)
	}
	c := &computer{id: id, spec: spec, d: d, done: make(chan struct{}), pod: pod.Name}
	d.track(c)
	fail := func(err error) (*computer, error) {
		c.Destroy(context.WithoutCancel(ctx))
		return nil, err
	}
	if _, err := d.cfg.Client.CoreV1().Secrets(d.cfg.Namespace).Create(ctx, d.secret(id, pod, server), metav1.CreateOptions{}); err != nil {
		return fail(unavailable("start computer: create secret: %w", err))
	}
	ip, err := d.waitRunning(ctx, pod.Name, nil)
	if err != nil {
		return fail(unavailable("start computer: pod %s: %w", pod.Name, err))
	}
	if err := d.handshake(ctx, c, ip, fp); err != nil {
		return fail(unavailable("start computer: pod %s: %w", pod.Name, err))
	}
	return c, nil
}

// handshake connects to the agent at ip, pinning its certificate's
// fingerprint fp, starts it for c's spec and attaches it to c.
func (d *Driver) handshake(ctx context.Context, c *computer, ip, fp string) error {
	conn, err := d.connect(ctx, ip, fp)
	if err != nil {
		return err
	}
	spec := c.spec
	init := protocol.Init{
		Hostname: "computer", Env: spec.Env, Timeout: protocol.Millis(spec.Timeout), MaxFile: spec.DiskBytes,
		MemoryHint: spec.MemoryBytes, TmpBytes: tmpBytes(spec), Python: sandbox.DefaultPython,
	}
	if err := agent.Handshake(ctx, conn, init); err != nil {
		conn.Close()
		return err
	}
	c.attach(agent.NewClient(conn))
	return nil
}

func (d *Driver) track(c *computer) {
	d.mu.Lock()
	d.running[c.id] = c
	d.mu.Unlock()
}

func (d *Driver) untrack(c *computer) {
	d.mu.Lock()
	delete(d.running, c.id)
	d.mu.Unlock()
}

func (d *Driver) tracked(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.running[id] != nil
}

// remove deletes computer id's pod and Secret (gone already: nil). The pod
// goes with a grace period of one second: the kubelet kills its
// containers, then the API server removes it (a grace period of 0 would
// remove it at once, before anything was killed).
func (d *Driver) remove(ctx context.Context, id string) error {
	if err := d.deletePod(ctx, podName(id)); err != nil {
		return err
	}
	err := d.cfg.Client.CoreV1().Secrets(d.cfg.Namespace).Delete(ctx, secretName(id), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete secret %s: %w", secretName(id), err)
	}
	return nil
}

// deletePod deletes a pod with a grace period of one second (gone
// already: nil).
func (d *Driver) deletePod(ctx context.Context, name string) error {
	grace := int64(1)
	err := d.cfg.Client.CoreV1().Pods(d.cfg.Namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete pod %s: %w", name, err)
	}
	return nil
}

// keepSandboxObjects makes the SandboxTemplate and SandboxWarmPool,
// trying again (backing off up to 30 s) until they are made or ctx ends.
func (d *Driver) keepSandboxObjects(ctx context.Context) {
	defer d.bg.Done()
	for backoff := time.Second; ; backoff = min(2*backoff, 30*time.Second) {
		err := d.ensureSandboxObjects(ctx)
		if err == nil || ctx.Err() != nil {
			return
		}
		d.log.Warn("kubernetes: agent-sandbox: make the template and warm pool", "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
	}
}
