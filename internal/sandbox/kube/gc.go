package kube

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// GC deletes the pods and Secrets of this deployment that no live replica
// owns (their replica's lease lapsed), and this replica's own that it no
// longer tracks (a start that failed half-way), once older than a start
// may take. A Secret whose pod is gone goes too (the cluster's garbage
// collector deletes it anyway, through its owner reference).
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
	sel := metav1.ListOptions{LabelSelector: d.selector() + "," + LabelRole + "=" + roleComputer}
	pods, err := d.cfg.Client.CoreV1().Pods(d.cfg.Namespace).List(ctx, sel)
	if err != nil {
		return rep, fmt.Errorf("kubernetes gc: list pods: %w", err)
	}
	old := time.Now().Add(-d.cfg.StartTimeout)
	orphan := func(m metav1.ObjectMeta) bool {
		owner, id := m.Labels[LabelInstance], m.Labels[LabelComputer]
		if !live[owner] {
			return true
		}
		return owner == self && !d.tracked(id) && m.CreationTimestamp.Time.Before(old)
	}
	havePod := map[string]bool{}
	var firstErr error
	for _, p := range pods.Items {
		id := p.Labels[LabelComputer]
		if !orphan(p.ObjectMeta) {
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
