package kube

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// The warm pool: Config.PoolSize ready pods of Config.PoolSpec, each with
// its agent connected, labelled cubicle.dev/state=pool. A create whose
// spec is the pool's (its owner aside) takes one and relabels it
// claimed; refill makes the next in the background.

// poolable reports whether spec can be served by a pooled pod: the same
// limits and environment, nothing else asked (its owner aside; empty and
// nil lists alike).
func (d *Driver) poolable(spec sandbox.Spec) bool {
	p := d.cfg.PoolSpec
	return spec.MemoryBytes == p.MemoryBytes && spec.Pids == p.Pids && spec.CPUs == p.CPUs &&
		spec.DiskBytes == p.DiskBytes && spec.Timeout == p.Timeout && slices.Equal(spec.Env, p.Env) &&
		spec.Network != sandbox.NetworkInternet && len(spec.Mounts) == 0 && len(spec.Volumes) == 0 &&
		spec.Root == (sandbox.Root{})
}

// claim takes a live pooled computer for spec and relabels its pod, or
// returns nil (then the create makes a pod).
func (d *Driver) claim(ctx context.Context, spec sandbox.Spec) *computer {
	if d.cfg.PoolSize == 0 || !d.poolable(spec) {
		return nil
	}
	for {
		var c *computer
		select {
		case c = <-d.pool:
		default:
			return nil
		}
		d.kick()
		select {
		case <-c.Done(): // died while pooled
			c.Destroy(context.WithoutCancel(ctx))
			continue
		default:
		}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{LabelState: stateClaimed}}})
		if _, err := d.cfg.Client.CoreV1().Pods(d.cfg.Namespace).Patch(ctx, podName(c.id), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			d.log.Warn("kubernetes: claim a pooled pod", "computer", c.id, "err", err)
			c.Destroy(context.WithoutCancel(ctx))
			continue
		}
		c.spec = spec
		return c
	}
}

// PoolDepth is how many pooled pods are ready to be claimed (their agents
// connected).
func (d *Driver) PoolDepth() int { return len(d.pool) }

func (d *Driver) kick() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// refill keeps the pool full until ctx ends, backing off (up to 30 s)
// while starts fail.
func (d *Driver) refill(ctx context.Context) {
	defer d.bg.Done()
	backoff := time.Second
	for ctx.Err() == nil {
		if len(d.pool) >= d.cfg.PoolSize {
			select {
			case <-ctx.Done():
				return
			case <-d.wake:
			}
			continue
		}
		c, err := d.start(ctx, sandbox.NewID(), d.cfg.PoolSpec, statePool)
		if err != nil {
			if ctx.Err() == nil {
				d.log.Warn("kubernetes: warm pool: start a pod", "err", err, "retry_in", backoff)
			}
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 30*time.Second)
			continue
		}
		backoff = time.Second
		d.pool <- c // never blocks: only refill adds, below the capacity
	}
}
