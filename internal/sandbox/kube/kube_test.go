package kube_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/cubicle-sandbox/cubicle/internal/kubetest"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/drivertest"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/kube"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/kube/podtest"
	"github.com/cubicle-sandbox/cubicle/internal/testbin"
)

var bin string

func TestMain(m *testing.M) { os.Exit(testbin.Main(m, &bin)) }

// cluster is a real control plane whose node runs the driver's pods as
// real pod agents (podtest.Kubelet), and a namespace of the test's.
type cluster struct {
	*kubetest.Cluster
	client kubernetes.Interface
	dyn    dynamic.Interface
	ns     string
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	c := kubetest.Start(t)
	client, dyn, err := kube.NewClients(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c.OnPodBound(podtest.Kubelet(bin, client))
	return &cluster{Cluster: c, client: client, dyn: dyn, ns: c.Namespace(t)}
}

// driver is a started driver of instance in the cluster's namespace,
// closed when the test ends.
func (c *cluster) driver(t *testing.T, instance string, tweak func(*kube.Config)) *kube.Driver {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := kube.Config{Client: c.client, Dynamic: c.dyn, Namespace: c.ns, Image: "cubicle-agent:test", StartTimeout: time.Minute}
	if tweak != nil {
		tweak(&cfg)
	}
	d, err := kube.New(ctx, cfg)
	if err != nil {
		t.Fatalf("kube.New: %v", err)
	}
	d.Start(instance, nil, sandbox.Spec{})
	t.Cleanup(func() { d.Close(context.Background()) })
	return d
}

// TestContract runs the driver contract on pods of a real API server,
// whose agents are real `cubicle agent --pod` processes. Nothing enforces
// a memory limit here (kwok runs no container runtime).
func TestContract(t *testing.T) {
	c := startCluster(t)
	drivertest.Run(t, func(t *testing.T) sandbox.Driver { return c.driver(t, "srv_contract", nil) },
		drivertest.Options{Python: true})
}

// TestPodObjects: a computer's pod carries the isolation the driver
// promises, its Secret is owned by the pod, the NetworkPolicy admits only
// the control plane on the agent's port and no egress; a destroy removes
// pod and Secret; specs the driver cannot run are refused naming it.
func TestPodObjects(t *testing.T) {
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.client.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "gvisor"}, Handler: "runsc"}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d := c.driver(t, "srv_objects", func(cfg *kube.Config) { cfg.RuntimeClass = "gvisor" })
	spec := sandbox.DefaultSpec()
	spec.MemoryBytes, spec.CPUs, spec.DiskBytes = 256<<20, 0.5, 128<<20
	sb, err := d.Create(ctx, spec)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	name := "cmp-" + sb.ID()[len("cmp_"):]
	pod, err := c.client.CoreV1().Pods(c.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ps, ct := pod.Spec, pod.Spec.Containers[0]
	sc := ct.SecurityContext
	switch {
	case ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken:
		t.Error("the pod mounts a service-account token")
	case ps.EnableServiceLinks == nil || *ps.EnableServiceLinks:
		t.Error("the pod gets service links")
	case ps.RuntimeClassName == nil || *ps.RuntimeClassName != "gvisor":
		t.Errorf("runtimeClassName %v", ps.RuntimeClassName)
	case ps.SecurityContext.RunAsNonRoot == nil || !*ps.SecurityContext.RunAsNonRoot || *ps.SecurityContext.RunAsUser != 1000:
		t.Errorf("pod security context %+v", ps.SecurityContext)
	case ps.SecurityContext.SeccompProfile == nil || ps.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Error("no RuntimeDefault seccomp profile")
	case sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL":
		t.Errorf("container security context %+v", sc)
	case ct.Resources.Limits.Memory().Value() != 256<<20 || ct.Resources.Limits.Cpu().MilliValue() != 500 ||
		ct.Resources.Limits.StorageEphemeral().Value() != 128<<20:
		t.Errorf("limits %v", ct.Resources.Limits)
	}
	secret, err := c.client.CoreV1().Secrets(c.ns).Get(ctx, name+"-tls", metav1.GetOptions{})
	if err != nil || len(secret.OwnerReferences) != 1 || secret.OwnerReferences[0].UID != pod.UID {
		t.Errorf("secret %v owners %+v, want owned by pod %s", err, secret.OwnerReferences, pod.UID)
	}
	np, err := c.client.NetworkingV1().NetworkPolicies(c.ns).Get(ctx, "cubicle-computers", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(np.Spec.Egress) != 0 || len(np.Spec.PolicyTypes) != 2 || len(np.Spec.Ingress) != 1 ||
		np.Spec.Ingress[0].Ports[0].Port.IntValue() != kube.Port ||
		np.Spec.Ingress[0].From[0].PodSelector.MatchLabels["app.kubernetes.io/name"] != "cubicle" {
		t.Errorf("network policy %+v", np.Spec)
	}
	// A second driver of the deployment finds the policy and the identity.
	c.driver(t, "srv_second", nil)

	for _, bad := range []func(*sandbox.Spec){
		func(s *sandbox.Spec) { s.Network = sandbox.NetworkInternet },
		func(s *sandbox.Spec) { s.Volumes = []sandbox.VolumeMount{{ID: "vol_x", Target: "/data"}} },
		func(s *sandbox.Spec) { s.Mounts = []sandbox.Mount{{Source: "/srv", Target: "/srv"}} },
	} {
		s := sandbox.DefaultSpec()
		bad(&s)
		if _, err := d.Create(ctx, s); err == nil || !containsAll(err.Error(), "kubernetes driver does not support") {
			t.Errorf("an unsupported spec: %v", err)
		}
	}

	if err := sb.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.client.CoreV1().Pods(c.ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("pod after destroy: %v", err)
	}
	if _, err := c.client.CoreV1().Secrets(c.ns).Get(ctx, name+"-tls", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("secret after destroy: %v", err)
	}
}

// TestPoolAndGC: a pooled pod is claimed by relabelling and replaced;
// another replica's GC deletes the pods of a replica that is not alive.
func TestPoolAndGC(t *testing.T) {
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	spec := sandbox.DefaultSpec()
	spec.DiskBytes = 64 << 20
	a := c.driver(t, "srv_a", func(cfg *kube.Config) { cfg.PoolSize = 1; cfg.PoolSpec = spec })
	pooled := waitPods(t, c, "cubicle.dev/state=pool", 1)[0]
	for deadline := time.Now().Add(2 * time.Minute); a.PoolDepth() == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the pooled pod's agent did not connect")
		}
	}
	begin := time.Now()
	sb, err := a.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if got := "cmp-" + sb.ID()[len("cmp_"):]; got != pooled {
		t.Errorf("created %s, want the pooled pod %s", got, pooled)
	}
	t.Logf("a create from the pool took %v", time.Since(begin))
	if p, err := c.client.CoreV1().Pods(c.ns).Get(ctx, pooled, metav1.GetOptions{}); err != nil || p.Labels["cubicle.dev/state"] != "claimed" {
		t.Errorf("claimed pod labels %v (%v)", p.Labels, err)
	}
	if next := waitPods(t, c, "cubicle.dev/state=pool", 1)[0]; next == pooled {
		t.Error("the pool was not refilled")
	}

	// a stops its pool (its pooled pod goes); replica b knows only itself
	// alive: a's claimed pod and its Secret go.
	takeOver(t, c, a, sb, nil)
	if r := sb.ExitReason(); r == "" {
		t.Error("no exit reason")
	}
	waitPods(t, c, "cubicle.dev/instance=srv_a", 0)
	secrets, err := c.client.CoreV1().Secrets(c.ns).List(ctx, metav1.ListOptions{LabelSelector: "cubicle.dev/instance=srv_a"})
	if err != nil || len(secrets.Items) != 0 {
		t.Errorf("a's secrets after GC: %d (%v)", len(secrets.Items), err)
	}
}

// takeOver closes replica a, starts replica srv_b (tweak) knowing only
// itself alive and runs its GC, which must collect a's one computer sb:
// sb's Done closes. It returns srv_b.
func takeOver(t *testing.T, c *cluster, a *kube.Driver, sb sandbox.Sandbox, tweak func(*kube.Config)) *kube.Driver {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	b := c.driver(t, "srv_b", tweak)
	rep, err := b.GC(ctx)
	if err != nil || rep.Computers != 1 {
		t.Fatalf("GC: %+v %v, want a's computer", rep, err)
	}
	select {
	case <-sb.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("a's computer did not end after GC collected it")
	}
	return b
}

// waitPods waits until the pods matching selector (not being deleted)
// are n, and returns their names.
func waitPods(t *testing.T, c *cluster, selector string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		list, err := c.client.CoreV1().Pods(c.ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
		var names []string
		if err == nil {
			for _, p := range list.Items {
				if p.DeletionTimestamp == nil && (n == 0 || p.Status.Phase == corev1.PodRunning) {
					names = append(names, p.Name)
				}
			}
			if n == 0 && len(list.Items) == 0 || n > 0 && len(names) == n {
				return names
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("pods %s: %v (%v), want %d", selector, names, err, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
