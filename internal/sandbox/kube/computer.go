package kube

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cubicle-sandbox/cubicle/internal/agent"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// computer is one pod. Processes, files, Python, kernels, terminals and
// ports are its agent's, through the embedded client.
type computer struct {
	*agent.Client
	id    string
	spec  sandbox.Spec
	d     *Driver
	claim string // its SandboxClaim (the agent-sandbox path), else ""

	done chan struct{} // closed once the control connection ended

	mu        sync.Mutex
	pod       string // its pod ("": not known yet)
	sandbox   string // its Sandbox (the agent-sandbox path; "": not known yet)
	reason    string
	deleting  bool // Kill deletes the pod
	killed    bool // Kill returned: the pod is gone
	destroyed bool
}

var _ sandbox.Sandbox = (*computer)(nil)

func (c *computer) ID() string         { return c.id }
func (c *computer) Spec() sandbox.Spec { return c.spec }

// Done is closed once the agent's control connection has ended: the agent
// exited (its pod was deleted or died) or it can no longer be reached,
// which ends the computer all the same (the agent accepts no second
// connection).
func (c *computer) Done() <-chan struct{} { return c.done }

// ExitReason says how the computer ended, once Done is closed.
func (c *computer) ExitReason() string {
	select {
	case <-c.done:
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.reason
	default:
		return ""
	}
}

// setObjects records the computer's Sandbox and pod once known.
func (c *computer) setObjects(sandbox, pod string) {
	c.mu.Lock()
	c.sandbox, c.pod = sandbox, pod
	c.mu.Unlock()
}

// attach gives the computer its agent's client and watches its end.
func (c *computer) attach(cl *agent.Client) {
	c.Client = cl
	go func() {
		<-cl.Done()
		reason := c.describeEnd()
		c.mu.Lock()
		c.reason = reason
		c.mu.Unlock()
		close(c.done)
	}()
}

// describeEnd says why the control connection ended: the pod's state as
// the API server tells it (bounded to 5 s), or that it was deleted.
func (c *computer) describeEnd() string {
	c.mu.Lock()
	deleted := c.deleting || c.killed || c.destroyed
	pod := c.pod
	c.mu.Unlock()
	if deleted {
		return "its pod was deleted"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p, err := c.d.cfg.Client.CoreV1().Pods(c.d.cfg.Namespace).Get(ctx, pod, metav1.GetOptions{})
	switch {
	case err != nil:
		return fmt.Sprintf("the connection to its agent ended; its pod: %v", err)
	case p.DeletionTimestamp != nil:
		return "its pod was deleted"
	}
	return "the connection to its agent ended; its pod: " + podEnd(p)
}

// Kill deletes the pod (on the agent-sandbox path its claim and Sandbox
// first) and returns once the API server removed it: the
// kubelet has stopped its containers (nothing of it runs). Idempotent.
func (c *computer) Kill(ctx context.Context) error {
	c.mu.Lock()
	if c.killed {
		c.mu.Unlock()
		return nil
	}
	c.deleting = true
	pod, sb := c.pod, c.sandbox
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if c.claim != "" && sb == "" {
		sb = c.claim // not bound yet: a Sandbox made for the claim (not a warm pool's) has its name
	}
	if pod == "" {
		pod = sb // a Sandbox's pod has its name, unless adopted from a warm pool (annotated)
	}
	var err error
	if c.claim != "" {
		err = c.d.removeClaimed(ctx, c.claim, sb, pod)
	} else {
		err = c.d.remove(ctx, c.id)
	}
	if err != nil {
		return err
	}
	if err := c.d.waitGone(ctx, pod); err != nil {
		return fmt.Errorf("kill computer %s: its pod was not removed: %w", c.id, err)
	}
	c.mu.Lock()
	c.killed = true
	c.mu.Unlock()
	if c.Client != nil {
		c.Client.Close()
	}
	return nil
}

// Destroy kills the computer (its pod and Secret go). Idempotent.
func (c *computer) Destroy(ctx context.Context) error {
	if err := c.Kill(ctx); err != nil {
		return err
	}
	c.mu.Lock()
	c.destroyed = true
	c.mu.Unlock()
	c.d.untrack(c)
	return nil
}

// Keep is not offered: a pod's workspace is an emptyDir that goes with it.
func (c *computer) Keep(context.Context) (string, error) {
	return "", errUnsupported("keeping a computer's workspace (cubicle run --keep)")
}

// OpenTerminal starts a process on a terminal (the agent's Terminal as a
// sandbox.Terminal, nil on error).
func (c *computer) OpenTerminal(ctx context.Context, req sandbox.TerminalRequest, out io.Writer) (sandbox.Terminal, error) {
	t, err := c.Client.OpenTerminal(ctx, req, out)
	if err != nil {
		return nil, err
	}
	return t, nil
}

// OpenKernel starts the computer's relayed kernel (the agent's
// KernelRelay as a sandbox.Kernel, nil on error).
func (c *computer) OpenKernel(ctx context.Context, start sandbox.KernelStart) (sandbox.Kernel, error) {
	k, err := c.Client.OpenKernel(ctx, start)
	if err != nil {
		return nil, err
	}
	return k, nil
}
