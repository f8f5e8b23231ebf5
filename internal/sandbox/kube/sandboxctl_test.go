package kube_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// agent-sandbox's API as this test serves it: CRDs written here (group,
// version, kind, plural and scope as kubernetes-sigs/agent-sandbox's
// v1beta1; a structural schema whose spec and status keep any field), and
// sandboxController playing its controllers. Not the real controller.

var (
	gvrSandbox  = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"}
	gvrTemplate = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxtemplates"}
	gvrWarmPool = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxwarmpools"}
	gvrClaim    = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxclaims"}
)

// crd is a CustomResourceDefinition of gvr's resource, kind kind.
func crd(gvr schema.GroupVersionResource, kind string, status bool) map[string]any {
	open := map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
	version := map[string]any{"name": gvr.Version, "served": true, "storage": true,
		"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object",
			"properties": map[string]any{"spec": open, "status": open}}}}
	if status {
		version["subresources"] = map[string]any{"status": map[string]any{}}
	}
	return map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": gvr.Resource + "." + gvr.Group},
		"spec": map[string]any{"group": gvr.Group, "scope": "Namespaced",
			"names":    map[string]any{"kind": kind, "listKind": kind + "List", "plural": gvr.Resource, "singular": strings.ToLower(kind)},
			"versions": []any{version}},
	}
}

// installAgentSandbox installs the CRDs, waits until discovery serves
// them, and runs sandboxController in the test's namespace until the test
// ends.
func (c *cluster) installAgentSandbox(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, d := range []map[string]any{
		crd(gvrSandbox, "Sandbox", true), crd(gvrTemplate, "SandboxTemplate", false),
		crd(gvrWarmPool, "SandboxWarmPool", true), crd(gvrClaim, "SandboxClaim", true),
	} {
		if err := c.Do(ctx, http.MethodPost, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", d, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, gvr := range []schema.GroupVersionResource{gvrSandbox, gvrTemplate, gvrWarmPool, gvrClaim} {
		for served := false; !served; time.Sleep(50 * time.Millisecond) {
			list, err := c.client.Discovery().ServerResourcesForGroupVersion(gvr.GroupVersion().String())
			if err == nil {
				for _, r := range list.APIResources {
					served = served || r.Name == gvr.Resource
				}
			}
			if ctx.Err() != nil {
				t.Fatalf("%s not served: %v", gvr.Resource, err)
			}
		}
	}
	cctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	sc := &sandboxController{c: c}
	go func() {
		defer close(done)
		for cctx.Err() == nil {
			if err := sc.reconcile(cctx); err != nil && cctx.Err() == nil {
				sc.last = err.Error()
			}
			select {
			case <-cctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() {
		stop()
		<-done
		if t.Failed() && sc.last != "" {
			t.Logf("the test's sandbox controller, last error: %s", sc.last)
		}
	})
}

// sandboxController plays agent-sandbox's controllers (its v1beta1
// controllers/sandbox_controller.go and extensions/controllers) in the
// test's namespace, one pass at a time:
//   - a SandboxWarmPool keeps spec.replicas Sandboxes of its template's
//     blueprint (generateName "<pool>-", controlled by the pool, label
//     agents.x-k8s.io/warm-pool-sandbox);
//   - a SandboxClaim adopts a Ready Sandbox of its warm pool (control moves
//     to the claim, the pool's label goes, agents.x-k8s.io/claim-uid is
//     set) or else gets a Sandbox named after it from the pool's template,
//     controlled by it; its status names the Sandbox and mirrors its Ready
//     condition and pod IPs;
//   - a Sandbox gets a Pod named after it (annotation
//     agents.x-k8s.io/pod-name) from its pod template, controlled by it;
//     its Ready condition is True once the pod runs, Ready, with an IP.
type sandboxController struct {
	c    *cluster
	last string // the last pass's error
}

func (s *sandboxController) api(gvr schema.GroupVersionResource) dynamic.ResourceInterface {
	return s.c.dyn.Resource(gvr).Namespace(s.c.ns)
}

func (s *sandboxController) list(ctx context.Context, gvr schema.GroupVersionResource) (map[string]*unstructured.Unstructured, error) {
	l, err := s.api(gvr).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	m := map[string]*unstructured.Unstructured{}
	for i := range l.Items {
		if l.Items[i].GetDeletionTimestamp() == nil {
			m[l.Items[i].GetName()] = &l.Items[i]
		}
	}
	return m, nil
}

func (s *sandboxController) reconcile(ctx context.Context) error {
	var objs [4]map[string]*unstructured.Unstructured
	for i, gvr := range []schema.GroupVersionResource{gvrTemplate, gvrWarmPool, gvrSandbox, gvrClaim} {
		var err error
		if objs[i], err = s.list(ctx, gvr); err != nil {
			return err
		}
	}
	templates, pools, sandboxes, claims := objs[0], objs[1], objs[2], objs[3]
	var errs []string
	note := func(err error) {
		if err != nil && !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			errs = append(errs, err.Error())
		}
	}
	for _, cl := range claims {
		note(s.claim(ctx, cl, templates, pools, sandboxes))
	}
	for _, p := range pools {
		note(s.pool(ctx, p, templates, sandboxes))
	}
	for _, sb := range sandboxes {
		note(s.sandbox(ctx, sb))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// str is a string field of an object.
func str(u *unstructured.Unstructured, path ...string) string {
	v, _, _ := unstructured.NestedString(u.Object, path...)
	return v
}

func controllerRef(u *unstructured.Unstructured) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Name: u.GetName(), UID: u.GetUID(),
		Controller: &yes, BlockOwnerDeletion: &yes}
}

func controlled(u *unstructured.Unstructured, uid types.UID) bool {
	ref := metav1.GetControllerOf(u)
	return ref != nil && ref.UID == uid
}

func ready(u *unstructured.Unstructured) (map[string]any, bool) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Ready" {
			return m, m["status"] == "True"
		}
	}
	return nil, false
}

func condition(status bool, reason, message string) map[string]any {
	st := "False"
	if status {
		st = "True"
	}
	return map[string]any{"type": "Ready", "status": st, "reason": reason, "message": message,
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
}

// setStatus writes status when it differs from u's (the condition's time
// aside).
func (s *sandboxController) setStatus(ctx context.Context, gvr schema.GroupVersionResource, u *unstructured.Unstructured, status map[string]any) error {
	old, _, _ := unstructured.NestedMap(u.Object, "status")
	if c, _ := ready(u); c != nil {
		if conds, _, _ := unstructured.NestedSlice(status, "conditions"); len(conds) == 1 {
			if m := conds[0].(map[string]any); m["status"] == c["status"] && m["reason"] == c["reason"] {
				m["lastTransitionTime"] = c["lastTransitionTime"]
			}
		}
	}
	if equality.Semantic.DeepEqual(old, status) {
		return nil
	}
	u = u.DeepCopy()
	u.Object["status"] = status
	_, err := s.api(gvr).UpdateStatus(ctx, u, metav1.UpdateOptions{})
	return err
}

// blueprint is a template's Sandbox spec.
func blueprint(tmpl *unstructured.Unstructured) map[string]any {
	pt, _, _ := unstructured.NestedMap(tmpl.Object, "spec", "podTemplate")
	return map[string]any{"podTemplate": pt}
}

func (s *sandboxController) claim(ctx context.Context, cl *unstructured.Unstructured, templates, pools, sandboxes map[string]*unstructured.Unstructured) error {
	name := str(cl, "status", "sandbox", "name")
	if name == "" {
		pool := pools[str(cl, "spec", "warmPoolRef", "name")]
		if pool == nil {
			return s.setStatus(ctx, gvrClaim, cl, map[string]any{"conditions": []any{condition(false, "WarmPoolNotFound", "no warm pool")}})
		}
		for _, sb := range sandboxes {
			if _, ok := ready(sb); !ok || !controlled(sb, pool.GetUID()) {
				continue
			}
			adopted := sb.DeepCopy()
			labels := adopted.GetLabels()
			delete(labels, "agents.x-k8s.io/warm-pool-sandbox")
			labels["agents.x-k8s.io/claim-uid"] = string(cl.GetUID())
			adopted.SetLabels(labels)
			adopted.SetOwnerReferences([]metav1.OwnerReference{controllerRef(cl)})
			if _, err := s.api(gvrSandbox).Update(ctx, adopted, metav1.UpdateOptions{}); err != nil {
				return err
			}
			delete(sandboxes, sb.GetName())
			name = sb.GetName()
			break
		}
		if name == "" {
			tmpl := templates[str(pool, "spec", "sandboxTemplateRef", "name")]
			if tmpl == nil {
				return s.setStatus(ctx, gvrClaim, cl, map[string]any{"conditions": []any{condition(false, "TemplateNotFound", "no template")}})
			}
			sb := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
				"metadata": map[string]any{"name": cl.GetName(), "labels": map[string]any{"agents.x-k8s.io/claim-uid": string(cl.GetUID())}},
				"spec":     blueprint(tmpl),
			}}
			sb.SetOwnerReferences([]metav1.OwnerReference{controllerRef(cl)})
			if _, err := s.api(gvrSandbox).Create(ctx, sb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
			name = cl.GetName()
		}
		return s.setStatus(ctx, gvrClaim, cl, map[string]any{"sandbox": map[string]any{"name": name},
			"conditions": []any{condition(false, "DependenciesNotReady", "the sandbox is not ready")}})
	}
	status := map[string]any{"sandbox": map[string]any{"name": name},
		"conditions": []any{condition(false, "SandboxMissing", "Sandbox does not exist")}}
	if sb := sandboxes[name]; sb != nil {
		if c, _ := ready(sb); c != nil {
			status["conditions"] = []any{c}
		}
		if ips, ok, _ := unstructured.NestedSlice(sb.Object, "status", "podIPs"); ok {
			status["sandbox"].(map[string]any)["podIPs"] = ips
		}
	}
	return s.setStatus(ctx, gvrClaim, cl, status)
}

func (s *sandboxController) pool(ctx context.Context, pool *unstructured.Unstructured, templates, sandboxes map[string]*unstructured.Unstructured) error {
	tmpl := templates[str(pool, "spec", "sandboxTemplateRef", "name")]
	if tmpl == nil {
		return nil
	}
	want, _, _ := unstructured.NestedInt64(pool.Object, "spec", "replicas")
	var members []string
	for name, sb := range sandboxes {
		if controlled(sb, pool.GetUID()) {
			members = append(members, name)
		}
	}
	for i := int64(len(members)); i < want; i++ {
		sb := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
			"metadata": map[string]any{"generateName": pool.GetName() + "-",
				"labels": map[string]any{"agents.x-k8s.io/warm-pool-sandbox": pool.GetName()}},
			"spec": blueprint(tmpl),
		}}
		sb.SetOwnerReferences([]metav1.OwnerReference{controllerRef(pool)})
		if _, err := s.api(gvrSandbox).Create(ctx, sb, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	for i := want; i < int64(len(members)); i++ {
		if err := s.api(gvrSandbox).Delete(ctx, members[i], metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

func (s *sandboxController) sandbox(ctx context.Context, sb *unstructured.Unstructured) error {
	podName := sb.GetAnnotations()["agents.x-k8s.io/pod-name"]
	if podName == "" {
		podName = sb.GetName()
	}
	pods := s.c.client.CoreV1().Pods(s.c.ns)
	pod, err := pods.Get(ctx, podName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		pt, _, _ := unstructured.NestedMap(sb.Object, "spec", "podTemplate")
		var tmpl corev1.PodTemplateSpec
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(pt, &tmpl); err != nil {
			return err
		}
		labels := map[string]string{"agents.x-k8s.io/sandbox-name-hash": sb.GetName()}
		for k, v := range tmpl.Labels {
			labels[k] = v
		}
		yes := true
		pod = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: sb.GetName(), Labels: labels, Annotations: tmpl.Annotations,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: sb.GetAPIVersion(), Kind: "Sandbox", Name: sb.GetName(), UID: sb.GetUID(), Controller: &yes, BlockOwnerDeletion: &yes}}},
			Spec: tmpl.Spec}
		if pod, err = pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return err
		}
		annotated := sb.DeepCopy()
		anns := annotated.GetAnnotations()
		if anns == nil {
			anns = map[string]string{}
		}
		anns["agents.x-k8s.io/pod-name"] = pod.Name
		annotated.SetAnnotations(anns)
		if sb, err = s.api(gvrSandbox).Update(ctx, annotated, metav1.UpdateOptions{}); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	cond := condition(false, "DependenciesNotReady", "Pod exists with phase: "+string(pod.Status.Phase))
	status := map[string]any{}
	switch {
	case pod.Status.Phase == corev1.PodFailed:
		cond = condition(false, "PodFailed", "Pod failed")
	case pod.Status.Phase == corev1.PodSucceeded:
		cond = condition(false, "PodSucceeded", "Pod completed successfully")
	case pod.Status.Phase == corev1.PodRunning && pod.Status.PodIP != "" && podReady(pod):
		cond = condition(true, "DependenciesReady", "Pod is Ready")
		status["podIPs"] = []any{pod.Status.PodIP}
	}
	status["conditions"] = []any{cond}
	return s.setStatus(ctx, gvrSandbox, sb, status)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
