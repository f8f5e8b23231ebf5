package kube

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox/kube/podagent"
)

var errPodGone = errors.New("the pod was deleted")

// waitFor gets an object (get), checks it, then watches it (watchFn, from
// the version got) until check says it is done or ctx ends: check gets
// each version and whether the object was deleted (then the object may be
// nil), and returns done and an error that ends the wait.
func waitFor[T interface{ GetResourceVersion() string }](ctx context.Context, get func(context.Context) (T, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error), name string, check func(T, bool) (bool, error)) error {
	for {
		obj, err := get(ctx)
		if apierrors.IsNotFound(err) {
			var gone T
			_, err = check(gone, true)
			return err
		}
		if err != nil {
			return err
		}
		if done, err := check(obj, false); done {
			return err
		}
		w, err := watchFn(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: obj.GetResourceVersion()})
		if err != nil {
			return err
		}
		done, err := watchUntil(ctx, w, check)
		w.Stop()
		if done {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// watchUntil feeds a watch's events to check; false when the watch ended
// without a verdict (it is then made again).
func watchUntil[T any](ctx context.Context, w watch.Interface, check func(T, bool) (bool, error)) (bool, error) {
	for {
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return false, nil
			}
			obj, isT := ev.Object.(T)
			if !isT {
				continue // a watch error (expired version): the watch ends, and is made again
			}
			if done, err := check(obj, ev.Type == watch.Deleted); done {
				return true, err
			}
		}
	}
}

// waitPod watches pod name until check says it is done (or ctx ends).
func (d *Driver) waitPod(ctx context.Context, name string, check func(*corev1.Pod, bool) (bool, error)) error {
	pods := d.cfg.Client.CoreV1().Pods(d.cfg.Namespace)
	return waitFor(ctx, func(ctx context.Context) (*corev1.Pod, error) { return pods.Get(ctx, name, metav1.GetOptions{}) },
		pods.Watch, name, check)
}

// waitRunning waits for the pod to run with an IP and returns the IP;
// ready, when not nil, must say the running pod is ready too (or fail
// it).
func (d *Driver) waitRunning(ctx context.Context, name string, ready func(*corev1.Pod) (bool, error)) (string, error) {
	var ip string
	err := d.waitPod(ctx, name, func(p *corev1.Pod, deleted bool) (bool, error) {
		switch {
		case deleted || p.DeletionTimestamp != nil:
			return true, errPodGone
		case p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded:
			return true, fmt.Errorf("the pod ended before its agent answered: %s", podEnd(p))
		case p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "":
			if ready != nil {
				if done, err := ready(p); !done || err != nil {
					return err != nil, err
				}
			}
			ip = p.Status.PodIP
			return true, nil
		}
		return false, nil
	})
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("not running within %v (%w)", d.cfg.StartTimeout, err)
	}
	return ip, err
}

// waitGone waits for the pod to be deleted.
func (d *Driver) waitGone(ctx context.Context, name string) error {
	return d.waitPod(ctx, name, func(_ *corev1.Pod, deleted bool) (bool, error) { return deleted, nil })
}

// podEnd describes how a pod's agent container ended.
func podEnd(p *corev1.Pod) string {
	for _, s := range p.Status.ContainerStatuses {
		if t := s.State.Terminated; t != nil {
			return fmt.Sprintf("its agent exited with code %d (%s) %s", t.ExitCode, t.Reason, t.Message)
		}
	}
	if p.Status.Reason != "" {
		return p.Status.Reason + ": " + p.Status.Message
	}
	return "phase " + string(p.Status.Phase)
}

// connect dials the pod's agent until it answers (it may still be
// starting) and authenticates both sides: the control plane's client
// certificate, the pod's pinned by its fingerprint.
func (d *Driver) connect(ctx context.Context, ip, fingerprint string) (*tls.Conn, error) {
	cfg, err := podagent.ClientConfig(d.client, fingerprint)
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort(ip, strconv.Itoa(Port))
	wait := 20 * time.Millisecond
	for {
		raw, err := d.cfg.Dial(ctx, "tcp", addr)
		if err == nil {
			conn := tls.Client(raw, cfg)
			if err = conn.HandshakeContext(ctx); err == nil {
				return conn, nil
			}
			raw.Close() // not listening yet, or not the pinned agent: until the deadline
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("connect to its agent at %s: %w (last: %v)", addr, ctx.Err(), err)
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}
