package kube_test

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/drivertest"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/kube"
)

// poolSpec is the spec of the agent-sandbox tests' computers (the
// contract's).
func poolSpec() sandbox.Spec {
	s := sandbox.DefaultSpec()
	s.DiskBytes = 64 << 20
	return s
}

// TestAgentSandbox: without agent-sandbox's CRDs "auto" makes plain pods
// and "on" fails naming what is missing; with them the driver makes its
// SandboxTemplate and SandboxWarmPool, a create claims the warm pool's
// Sandbox (no per-pod Secret: the pod made its own key pair), the pool
// refills, another shape is a plain pod; GC deletes the claims of a
// replica that is gone and leaves the pool alone; a destroy deletes
// claim, Sandbox and pod. Then the driver contract runs on this path
// (one cluster for both: each costs seconds to start): every computer a
// SandboxClaim, bound by the test's controller to a Sandbox whose pod
// runs a real pod agent that made its own key pair.
func TestAgentSandbox(t *testing.T) {
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if d := c.driver(t, "srv_plain", nil); d.AgentSandbox() {
		t.Error("auto chose agent-sandbox on a cluster without its CRDs")
	}
	_, err := kube.New(ctx, kube.Config{Client: c.client, Dynamic: c.dyn, Namespace: c.ns, Image: "cubicle-agent:test",
		AgentSandbox: kube.AgentSandboxOn})
	if err == nil || !containsAll(err.Error(), `kubernetes.agent_sandbox is "on" but the cluster does not serve`,
		"agents.x-k8s.io/v1beta1 Sandbox", "extensions.agents.x-k8s.io/v1beta1 SandboxClaim", "install agent-sandbox") {
		t.Fatalf("on without the CRDs: %v", err)
	}

	c.installAgentSandbox(t)
	spec := poolSpec()
	pooled := func(cfg *kube.Config) { cfg.PoolSize, cfg.PoolSpec = 1, spec }
	a := c.driver(t, "srv_a", pooled)
	if !a.AgentSandbox() {
		t.Fatal("auto did not choose agent-sandbox on a cluster serving its CRDs")
	}
	tmpl, err := c.dyn.Resource(gvrTemplate).Namespace(c.ns).Get(ctx, "cubicle-pool", metav1.GetOptions{})
	for deadline := time.Now().Add(time.Minute); apierrors.IsNotFound(err) && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		tmpl, err = c.dyn.Resource(gvrTemplate).Namespace(c.ns).Get(ctx, "cubicle-pool", metav1.GetOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	inits, _, _ := unstructured.NestedSlice(tmpl.Object, "spec", "podTemplate", "spec", "initContainers")
	vols, _, _ := unstructured.NestedSlice(tmpl.Object, "spec", "podTemplate", "spec", "volumes")
	var tlsSecret string
	for _, v := range vols {
		if m := v.(map[string]any); m["name"] == "tls" {
			tlsSecret, _, _ = unstructured.NestedString(m, "secret", "secretName")
		}
	}
	if str(tmpl, "spec", "networkPolicyManagement") != "Unmanaged" || len(inits) != 1 || inits[0].(map[string]any)["name"] != "keygen" ||
		tlsSecret != "cubicle-agent-trust" {
		t.Errorf("template %v", tmpl.Object["spec"])
	}
	trust, err := c.client.CoreV1().Secrets(c.ns).Get(ctx, "cubicle-agent-trust", metav1.GetOptions{})
	if err != nil || len(trust.Data) != 1 || len(trust.Data["client.crt"]) == 0 {
		t.Fatalf("trust secret %v (%v), want the client certificate alone", trust, err)
	}
	pool := waitPoolSandbox(t, c, "")

	sb, err := a.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	claimName := "cmp-" + sb.ID()[len("cmp_"):]
	claim, err := c.dyn.Resource(gvrClaim).Namespace(c.ns).Get(ctx, claimName, metav1.GetOptions{})
	if err != nil || str(claim, "status", "sandbox", "name") != pool || claim.GetLabels()["cubicle.dev/instance"] != "srv_a" {
		t.Fatalf("claim %v (%v), want bound to the pool's sandbox %s", claim, err, pool)
	}
	if _, err := c.client.CoreV1().Secrets(c.ns).Get(ctx, claimName+"-tls", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a claimed computer's secret: %v, want none", err)
	}
	var out strings.Builder
	if st, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "echo claimed"}, sandbox.ExecIO{Stdout: &out}); err != nil || st.ExitCode != 0 || out.String() != "claimed\n" {
		t.Errorf("exec: %q %+v %v", out.String(), st, err)
	}
	next := waitPoolSandbox(t, c, pool)

	other := spec
	other.MemoryBytes = 256 << 20
	plain, err := a.Create(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	plainName := "cmp-" + plain.ID()[len("cmp_"):]
	if _, err := c.client.CoreV1().Secrets(c.ns).Get(ctx, plainName+"-tls", metav1.GetOptions{}); err != nil {
		t.Errorf("another shape's computer is not a plain pod with its secret: %v", err)
	}
	if _, err := c.dyn.Resource(gvrClaim).Namespace(c.ns).Get(ctx, plainName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("another shape's claim: %v, want none", err)
	}
	if err := plain.Destroy(ctx); err != nil {
		t.Fatal(err)
	}

	// a stops; b, knowing only itself alive, deletes a's claim (and its
	// sandbox and pod), not the warm pool's.
	b := takeOver(t, c, a, sb, pooled)
	gone(t, c, claimName, pool)
	if _, err := c.dyn.Resource(gvrSandbox).Namespace(c.ns).Get(ctx, next, metav1.GetOptions{}); err != nil {
		t.Errorf("GC took the warm pool's sandbox: %v", err)
	}

	sb2, err := b.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	claim2 := "cmp-" + sb2.ID()[len("cmp_"):]
	claim, err = c.dyn.Resource(gvrClaim).Namespace(c.ns).Get(ctx, claim2, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bound := str(claim, "status", "sandbox", "name")
	if err := sb2.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	gone(t, c, claim2, bound)

	t.Run("Contract", func(t *testing.T) {
		drivertest.Run(t, func(t *testing.T) sandbox.Driver {
			return c.driver(t, "srv_contract", func(cfg *kube.Config) { pooled(cfg); cfg.AgentSandbox = kube.AgentSandboxOn })
		}, drivertest.Options{Python: true})
	})
}

// waitPoolSandbox waits for a Ready sandbox of the warm pool other than
// not and returns its name.
func waitPoolSandbox(t *testing.T, c *cluster, not string) string {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		list, err := c.dyn.Resource(gvrSandbox).Namespace(c.ns).List(context.Background(),
			metav1.ListOptions{LabelSelector: "agents.x-k8s.io/warm-pool-sandbox=cubicle-pool"})
		if err == nil {
			for i := range list.Items {
				if _, ok := ready(&list.Items[i]); ok && list.Items[i].GetName() != not {
					return list.Items[i].GetName()
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ready sandbox in the warm pool (%v)", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// gone checks that a claim, its sandbox and the sandbox's pod are deleted
// (the pod waited for: its deletion takes the node's stop).
func gone(t *testing.T, c *cluster, claim, sb string) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.dyn.Resource(gvrClaim).Namespace(c.ns).Get(ctx, claim, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("claim %s: %v, want deleted", claim, err)
	}
	if _, err := c.dyn.Resource(gvrSandbox).Namespace(c.ns).Get(ctx, sb, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("sandbox %s: %v, want deleted", sb, err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		_, err := c.client.CoreV1().Pods(c.ns).Get(ctx, sb, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s: %v, want deleted", sb, err)
		}
	}
}
