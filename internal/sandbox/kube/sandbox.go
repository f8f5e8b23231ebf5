package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/kube/podagent"
)

// The agent-sandbox path (kubernetes-sigs/agent-sandbox): where the
// cluster serves its CRDs, a computer of the pool's shape is a
// SandboxClaim on the deployment's SandboxWarmPool of one SandboxTemplate
// (the same pod spec as the plain path's, plus the keygen init
// container), through the dynamic client (agent-sandbox's Go module is
// not a dependency). agent-sandbox's controller binds the claim to a
// ready Sandbox of the pool (or makes one from the template) whose Pod
// runs the agent; the driver pins the certificate the pod made for
// itself, which its kubelet published (podagent/keygen.go), and connects
// as on the plain path. docs/fleet.md has the objects and the decisions.

// AgentSandbox modes (Config.AgentSandbox).
const (
	AgentSandboxAuto = "auto" // the CRDs when the cluster serves them
	AgentSandboxOn   = "on"   // the CRDs, required
	AgentSandboxOff  = "off"  // plain Pods
)

// The group versions and resources of agent-sandbox's API.
const (
	sandboxGV    = "agents.x-k8s.io/v1beta1"
	extensionsGV = "extensions.agents.x-k8s.io/v1beta1"
)

var (
	gvrSandbox  = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"}
	gvrTemplate = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxtemplates"}
	gvrWarmPool = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxwarmpools"}
	gvrClaim    = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxclaims"}
)

// agentSandboxKinds are, per group version, the resources the driver uses
// and their kinds.
var agentSandboxKinds = map[string]map[string]string{
	sandboxGV:    {"sandboxes": "Sandbox"},
	extensionsGV: {"sandboxtemplates": "SandboxTemplate", "sandboxwarmpools": "SandboxWarmPool", "sandboxclaims": "SandboxClaim"},
}

// Annotations agent-sandbox sets, and ours on the objects we keep.
const (
	// annotationPodName is the Sandbox's pod when it is not the
	// Sandbox's name (a warm pool's, adopted).
	annotationPodName = "agents.x-k8s.io/pod-name"
	// AnnotationSpec is the SHA-256 of the spec the driver wrote into a
	// SandboxTemplate or SandboxWarmPool: a replica updates the object
	// only when its own differs.
	AnnotationSpec = "cubicle.dev/spec-sha256"
)

// missingAgentSandbox lists the resources of agent-sandbox's API the
// cluster does not serve (none: it serves them all).
func missingAgentSandbox(dc discovery.DiscoveryInterface) ([]string, error) {
	var missing []string
	for gv, want := range agentSandboxKinds {
		have := map[string]string{}
		list, err := dc.ServerResourcesForGroupVersion(gv)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("discover %s: %w", gv, err)
		default:
			for _, r := range list.APIResources {
				have[r.Name] = r.Kind
			}
		}
		for plural, kind := range want {
			if have[plural] != kind {
				missing = append(missing, gv+" "+kind)
			}
		}
	}
	slices.Sort(missing)
	return missing, nil
}

// chooseAgentSandbox decides, once at New, whether computers are
// agent-sandbox's: "on" without its API is an error naming what is
// missing.
func (d *Driver) chooseAgentSandbox() error {
	if d.cfg.AgentSandbox == AgentSandboxOff {
		return nil
	}
	missing, err := missingAgentSandbox(d.cfg.Client.Discovery())
	if err != nil {
		return err
	}
	on := d.cfg.AgentSandbox == AgentSandboxOn
	switch {
	case len(missing) > 0 && on:
		return fmt.Errorf("kubernetes.agent_sandbox is %q but the cluster does not serve %s: install agent-sandbox (its CRDs and controller) or set it to %q",
			AgentSandboxOn, strings.Join(missing, ", "), AgentSandboxAuto)
	case len(missing) > 0:
		return nil
	case d.cfg.Dynamic == nil && on:
		return errors.New("kubernetes.agent_sandbox is \"on\" but the driver has no dynamic client")
	case d.cfg.Dynamic == nil:
		return nil
	}
	d.sandboxes = true
	return nil
}

// poolName names the deployment's SandboxTemplate and SandboxWarmPool;
// trustSecret the Secret of the control plane's certificates their pods
// mount (public material only).
func (d *Driver) poolName() string    { return d.cfg.Deployment + "-pool" }
func (d *Driver) trustSecret() string { return d.cfg.Deployment + "-agent-trust" }

// deploymentLabels label the deployment's shared objects.
func (d *Driver) deploymentLabels() map[string]string {
	return map[string]string{LabelManaged: "cubicle", LabelDeployment: d.cfg.Deployment}
}

// ensureTrust creates or updates the Secret of the control plane's client
// certificate that agent-sandbox's pods mount as their client.crt.
func (d *Driver) ensureTrust(ctx context.Context) error {
	api := d.cfg.Client.CoreV1().Secrets(d.cfg.Namespace)
	want := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: d.trustSecret(), Namespace: d.cfg.Namespace, Labels: d.deploymentLabels()},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{podagent.ClientCerts: d.client.CertPEM},
	}
	return ensure(ctx, "secret "+want.Name,
		func(ctx context.Context) error { _, err := api.Create(ctx, want, metav1.CreateOptions{}); return err },
		func(ctx context.Context) (*corev1.Secret, error) { return api.Get(ctx, want.Name, metav1.GetOptions{}) },
		func(have *corev1.Secret) bool {
			return string(have.Data[podagent.ClientCerts]) == string(want.Data[podagent.ClientCerts])
		},
		func(ctx context.Context, have *corev1.Secret) error {
			have.Data = want.Data
			_, err := api.Update(ctx, have, metav1.UpdateOptions{})
			return err
		})
}

// sandboxShape reports whether spec is a computer of the pool's pod shape
// (memory, CPUs, disk), the one the SandboxTemplate describes; the rest of
// a spec reaches the agent when it is claimed (its Init).
func (d *Driver) sandboxShape(spec sandbox.Spec) bool {
	p := d.poolSpec()
	return spec.MemoryBytes == p.MemoryBytes && spec.CPUs == p.CPUs && spec.DiskBytes == p.DiskBytes
}

func (d *Driver) poolSpec() sandbox.Spec {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cfg.PoolSpec
}

// ensureSandboxObjects makes (or updates) the deployment's SandboxTemplate
// and SandboxWarmPool, once per driver.
func (d *Driver) ensureSandboxObjects(ctx context.Context) error {
	d.sbMu.Lock()
	defer d.sbMu.Unlock()
	if d.sbReady {
		return nil
	}
	tmpl, err := d.sandboxTemplate(d.poolSpec())
	if err != nil {
		return err
	}
	if err := d.ensureObject(ctx, gvrTemplate, tmpl); err != nil {
		return err
	}
	if err := d.ensureObject(ctx, gvrWarmPool, d.warmPool()); err != nil {
		return err
	}
	d.sbReady = true
	return nil
}

// ensureObject creates obj, or updates the spec of the one there when it
// is not what this replica would write (AnnotationSpec).
func (d *Driver) ensureObject(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) error {
	b, err := json.Marshal(obj.Object["spec"])
	if err != nil {
		return err
	}
	sum := sha256.Sum256(b)
	want := hex.EncodeToString(sum[:])
	obj.SetAnnotations(map[string]string{AnnotationSpec: want})
	api := d.cfg.Dynamic.Resource(gvr).Namespace(d.cfg.Namespace)
	return ensure(ctx, obj.GetKind()+" "+obj.GetName(),
		func(ctx context.Context) error { _, err := api.Create(ctx, obj, metav1.CreateOptions{}); return err },
		func(ctx context.Context) (*unstructured.Unstructured, error) {
			return api.Get(ctx, obj.GetName(), metav1.GetOptions{})
		},
		func(have *unstructured.Unstructured) bool { return have.GetAnnotations()[AnnotationSpec] == want },
		func(ctx context.Context, have *unstructured.Unstructured) error {
			have.Object["spec"] = obj.Object["spec"]
			anns := have.GetAnnotations()
			if anns == nil {
				anns = map[string]string{}
			}
			anns[AnnotationSpec] = want
			have.SetAnnotations(anns)
			_, err := api.Update(ctx, have, metav1.UpdateOptions{})
			return err
		})
}

// sandboxTemplate is the SandboxTemplate of computers of spec's shape:
// the plain path's pod spec with the keygen init container and the trust
// Secret; agent-sandbox's NetworkPolicy management off (ours applies: its
// managed default allows egress to the internet, and NetworkPolicies add
// up).
func (d *Driver) sandboxTemplate(spec sandbox.Spec) (*unstructured.Unstructured, error) {
	ps := d.podSpec(spec, d.trustSecret(), true)
	psMap, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&ps)
	if err != nil {
		return nil, err
	}
	podLabels := d.deploymentLabels()
	podLabels[LabelRole] = roleComputer
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": extensionsGV, "kind": "SandboxTemplate",
		"metadata": map[string]any{"name": d.poolName(), "namespace": d.cfg.Namespace, "labels": anyMap(d.deploymentLabels())},
		"spec": map[string]any{
			"podTemplate":             map[string]any{"metadata": map[string]any{"labels": anyMap(podLabels)}, "spec": psMap},
			"networkPolicyManagement": "Unmanaged",
		},
	}}, nil
}

// warmPool is the deployment's SandboxWarmPool: PoolSize sandboxes of the
// template, replaced at once when the template changes (Recreate: an
// unclaimed sandbox runs no computer).
func (d *Driver) warmPool() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": extensionsGV, "kind": "SandboxWarmPool",
		"metadata": map[string]any{"name": d.poolName(), "namespace": d.cfg.Namespace, "labels": anyMap(d.deploymentLabels())},
		"spec": map[string]any{
			"replicas":           int64(d.cfg.PoolSize),
			"sandboxTemplateRef": map[string]any{"name": d.poolName()},
			"updateStrategy":     map[string]any{"type": "Recreate"},
		},
	}}
}

// newClaim is computer id's SandboxClaim on the deployment's pool.
func (d *Driver) newClaim(id string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": extensionsGV, "kind": "SandboxClaim",
		"metadata": map[string]any{"name": podName(id), "namespace": d.cfg.Namespace, "labels": anyMap(d.labels(id, stateClaimed))},
		"spec":     map[string]any{"warmPoolRef": map[string]any{"name": d.poolName()}},
	}}
}

func anyMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
