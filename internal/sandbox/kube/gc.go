package kube

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// GC deletes the pods and Secrets (and, with agent-sandbox, the
// SandboxClaims) of this deployment that no live replica owns (their
// replica's lease lapsed), and this replica's own that it no longer
// tracks (a start that failed half-way), once older than a start may
// take. A Secret whose pod is gone goes too (the cluster's garbage
// collector deletes it anyway, through its owner reference). The pods of
// agent-sandbox's Sandboxes carry no replica (a warm pool's are made
// before any claim): they go with their claims.
func (d *Driver) GC(ctx context.Context) (sandbox.GCReport, error) {
	var rep sandbox.GCReport
	d.mu.Lock()
	self, liveFn := d.cfg.Instance, d.cfg.Live
	d.mu.Unlock()
	if self == "" {
		return rep, errNotStarted
	}
	live := map[string]bool{self: true}
	if liveFn != nil {
		m, err := liveFn(ctx)
		if err != nil {
			return rep, fmt.Errorf("kubernetes gc: live replicas: %w", err)
		}
		for k, v := range m {
			live[k] = live[k] || v
		}
	}
	sel := metav1.ListOptions{LabelSelector: d.selector() + "," + LabelRole + "=" + roleComputer + "," + LabelInstance}
	old := time.Now().Add(-d.cfg.StartTimeout)
	orphan := func(m metav1.Object) bool {
		owner, id := m.GetLabels()[LabelInstance], m.GetLabels()[LabelComputer]
		if !live[owner] {
			return true
		}
		return owner == self && !d.tracked(id) && m.GetCreationTimestamp().Time.Before(old)
	}
	var firstErr error
	if d.sandboxes {
		n, err := d.gcClaims(ctx, sel, orphan)
		rep.Computers += n
		firstErr = err
	}
	pods, err := d.cfg.Client.CoreV1().Pods(d.cfg.Namespace).List(ctx, sel)
	if err != nil {
		return rep, cmpErr(firstErr, fmt.Errorf("kubernetes gc: list pods: %w", err))
	}
	havePod := map[string]bool{}
	for _, p := range pods.Items {
		id := p.Labels[LabelComputer]
		if !orphan(&p.ObjectMeta) {
			havePod[id] = true
			continue
		}
		if err := d.remove(ctx, id); err != nil {
			firstErr = cmpErr(firstErr, err)
			continue
		}
		rep.Computers++
	}
	secrets, err := d.cfg.Client.CoreV1().Secrets(d.cfg.Namespace).List(ctx, sel)
	if err != nil {
		return rep, cmpErr(firstErr, fmt.Errorf("kubernetes gc: list secrets: %w", err))
	}
	for _, s := range secrets.Items {
		// Pods are made before their Secrets: a Secret without a kept pod
		// is an orphan, unless its replica lives and it is young (its pod
		// was made after the pods were listed).
		id := s.Labels[LabelComputer]
		if havePod[id] || live[s.Labels[LabelInstance]] && s.CreationTimestamp.Time.After(old) {
			continue
		}
		if err := d.remove(ctx, id); err != nil {
			firstErr = cmpErr(firstErr, err)
		}
	}
	return rep, firstErr
}

// gcClaims deletes the orphaned SandboxClaims (and their Sandboxes and
// pods, without waiting for the pods to end) among those sel selects.
func (d *Driver) gcClaims(ctx context.Context, sel metav1.ListOptions, orphan func(metav1.Object) bool) (int, error) {
	claims, err := d.cfg.Dynamic.Resource(gvrClaim).Namespace(d.cfg.Namespace).List(ctx, sel)
	if err != nil {
		return 0, fmt.Errorf("kubernetes gc: list sandbox claims: %w", err)
	}
	var n int
	var firstErr error
	for i := range claims.Items {
		cl := &claims.Items[i]
		if !orphan(cl) {
			continue
		}
		sb, _, _ := unstructured.NestedString(cl.Object, "status", "sandbox", "name")
		var pod string
		if sb != "" {
			pod, _, _ = d.sandboxPod(ctx, sb, cl.GetUID()) // not the claim's (or gone): left to the cluster's garbage collector
		}
		if err := d.removeClaimed(ctx, cl.GetName(), sb, pod); err != nil {
			firstErr = cmpErr(firstErr, err)
			continue
		}
		n++
	}
	return n, firstErr
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// gcLoop runs GC every Config.GCEvery until ctx ends.
func (d *Driver) gcLoop(ctx context.Context) {
	defer d.bg.Done()
	t := time.NewTicker(d.cfg.GCEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		gctx, cancel := context.WithTimeout(ctx, time.Minute)
		rep, err := d.GC(gctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			d.log.Warn("kubernetes gc", "err", err)
		} else if rep.Computers > 0 {
			d.log.Info("kubernetes gc: deleted the pods of replicas that are gone", "pods", rep.Computers)
		}
	}
}
