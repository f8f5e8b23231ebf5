package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/kube/podagent"
)

// A computer on the agent-sandbox path (sandbox.go): its SandboxClaim,
// the Sandbox agent-sandbox binds to it, that Sandbox's pod.

// Ready reasons of a claim that will not become ready.
var terminalReasons = []string{"PodFailed", "PodSucceeded", "ClaimExpired", "SandboxExpired"}

// startClaimed makes computer id a SandboxClaim, waits for agent-sandbox
// to bind it to a ready Sandbox, finds the Sandbox's pod and connects to
// its agent. A failed start deletes what it made.
func (d *Driver) startClaimed(ctx context.Context, id string, spec sandbox.Spec) (*computer, error) {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.StartTimeout)
	defer cancel()
	if err := d.ensureSandboxObjects(ctx); err != nil {
		return nil, unavailable("start computer: %w", err)
	}
	claim, err := d.cfg.Dynamic.Resource(gvrClaim).Namespace(d.cfg.Namespace).Create(ctx, d.newClaim(id), metav1.CreateOptions{})
	if err != nil {
		return nil, unavailable("start computer: create sandbox claim: %w", err)
	}
	c := &computer{id: id, spec: spec, d: d, done: make(chan struct{}), claim: claim.GetName()}
	d.track(c)
	fail := func(err error) (*computer, error) {
		c.Destroy(context.WithoutCancel(ctx))
		return nil, unavailable("start computer: sandbox claim %s: %w", c.claim, err)
	}
	name, err := d.waitClaim(ctx, c.claim)
	if err != nil {
		return fail(err)
	}
	c.setObjects(name, "")
	pod, sbUID, err := d.sandboxPod(ctx, name, claim.GetUID())
	if err != nil {
		return fail(err)
	}
	c.setObjects(name, pod)
	var fp string
	ip, err := d.waitRunning(ctx, pod, func(p *corev1.Pod) (bool, error) {
		if !controlledBy(p.OwnerReferences, sbUID) || p.Labels[LabelRole] != roleComputer || p.Labels[LabelDeployment] != d.cfg.Deployment {
			return true, fmt.Errorf("pod %s is not a computer of sandbox %s", pod, name)
		}
		fp = publishedFingerprint(p)
		return fp != "", nil // a real kubelet publishes it before the agent starts
	})
	if err != nil {
		return fail(fmt.Errorf("pod %s: %w", pod, err))
	}
	if err := d.handshake(ctx, c, ip, fp); err != nil {
		return fail(fmt.Errorf("pod %s: %w", pod, err))
	}
	return c, nil
}

// waitClaim waits for the claim to be Ready, bound to a Sandbox, and
// returns the Sandbox's name.
func (d *Driver) waitClaim(ctx context.Context, name string) (string, error) {
	api := d.cfg.Dynamic.Resource(gvrClaim).Namespace(d.cfg.Namespace)
	var bound, last string
	err := waitFor(ctx,
		func(ctx context.Context) (*unstructured.Unstructured, error) {
			return api.Get(ctx, name, metav1.GetOptions{})
		},
		api.Watch,
		name,
		func(u *unstructured.Unstructured, deleted bool) (bool, error) {
			if deleted || u.GetDeletionTimestamp() != nil {
				return true, errors.New("the claim was deleted")
			}
			status, reason, message := readyCondition(u)
			sb, _, _ := unstructured.NestedString(u.Object, "status", "sandbox", "name")
			switch {
			case status == "True" && sb != "":
				bound = sb
				return true, nil
			case slices.Contains(terminalReasons, reason):
				return true, fmt.Errorf("not ready: %s: %s", reason, message)
			}
			if reason != "" {
				last = fmt.Sprintf(" (last: Ready=%s %s: %s)", status, reason, message)
			}
			return false, nil
		})
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("not bound to a ready sandbox within %v%s: is agent-sandbox's controller running? (%w)", d.cfg.StartTimeout, last, err)
	}
	return bound, err
}

// readyCondition is an object's Ready condition: status, reason, message.
func readyCondition(u *unstructured.Unstructured) (string, string, string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "Ready" {
			continue
		}
		s := func(k string) string { v, _ := m[k].(string); return v }
		return s("status"), s("reason"), s("message")
	}
	return "", "", ""
}

// sandboxPod is the pod of Sandbox name, which claim claimUID must
// control, and the Sandbox's UID.
func (d *Driver) sandboxPod(ctx context.Context, name string, claimUID types.UID) (string, types.UID, error) {
	sb, err := d.cfg.Dynamic.Resource(gvrSandbox).Namespace(d.cfg.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", "", fmt.Errorf("read sandbox %s: %w", name, err)
	}
	if !controlledBy(sb.GetOwnerReferences(), claimUID) {
		return "", "", fmt.Errorf("sandbox %s is not the claim's", name)
	}
	pod := sb.GetAnnotations()[annotationPodName]
	if pod == "" {
		pod = name
	}
	return pod, sb.GetUID(), nil
}

// controlledBy reports whether refs name uid as the controller.
func controlledBy(refs []metav1.OwnerReference, uid types.UID) bool {
	for _, r := range refs {
		if r.Controller != nil && *r.Controller && r.UID == uid {
			return true
		}
	}
	return false
}

// publishedFingerprint is the fingerprint the pod's keygen init container
// published through its kubelet ("": not yet, or not valid).
func publishedFingerprint(p *corev1.Pod) string {
	for _, s := range p.Status.InitContainerStatuses {
		if t := s.State.Terminated; s.Name == podagent.KeygenContainer && t != nil && t.ExitCode == 0 {
			fp, err := podagent.ParseFingerprint(t.Message)
			if err == nil {
				return fp
			}
		}
	}
	return ""
}

// removeClaimed deletes a claimed computer's objects: the claim first (so
// agent-sandbox makes no new Sandbox for it), then its Sandbox and pod
// when known (the cluster's garbage collector would, through their
// owners; the driver does not wait for it). Gone already: nil.
func (d *Driver) removeClaimed(ctx context.Context, claim, sb, pod string) error {
	bg := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &bg}
	for _, o := range []struct {
		gvr  schema.GroupVersionResource
		name string
	}{{gvrClaim, claim}, {gvrSandbox, sb}} {
		if o.name == "" {
			continue
		}
		err := d.cfg.Dynamic.Resource(o.gvr).Namespace(d.cfg.Namespace).Delete(ctx, o.name, opts)
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete %s %s: %w", o.gvr.Resource, o.name, err)
		}
	}
	if pod != "" {
		return d.deletePod(ctx, pod)
	}
	return nil
}
