package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cubicle-sandbox/cubicle/internal/kubetest"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/kube"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/kube/podtest"
)

// kubeCluster is a real control plane (internal/kubetest) whose node runs
// the driver's pods as real `cubicle agent --pod` processes, with a
// namespace of the test's, and the environment of a server whose
// computers are its pods.
func kubeCluster(t *testing.T) (kubernetes.Interface, string, []string) {
	c := kubetest.Start(t)
	client, err := kube.NewClient(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c.OnPodBound(podtest.Kubelet(cubicleBin, client))
	ns := c.Namespace(t)
	return client, ns, []string{"CUBICLE_COMPUTERS_DRIVER=kubernetes", "CUBICLE_KUBERNETES_KUBECONFIG=" + c.Kubeconfig,
		"CUBICLE_KUBERNETES_NAMESPACE=" + ns, "CUBICLE_KUBERNETES_IMAGE=cubicle-agent:test", "CUBICLE_KUBERNETES_GC_SECONDS=1"}
}

// pods lists the names of the computers' pods (label selector sel).
func pods(t *testing.T, client kubernetes.Interface, ns, sel string) []string {
	list, err := client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			names = append(names, p.Name)
		}
	}
	return names
}

func eventually(t *testing.T, what string, limit time.Duration, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(limit); !ok(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, limit)
		}
	}
}

// TestServeKubernetes (issue 18): `cubicle serve` with computers.driver
// = kubernetes runs computers as pods of a real API server: create (from
// the warm pool), exec as the sandbox user, a file, Python reading it, and
// delete (the pod goes) run end to end; a feature the driver lacks is a
// 422 naming it; with kubernetes.agent_sandbox = "on" on a cluster without
// agent-sandbox's CRDs the server does not start, saying why.
func TestServeKubernetes(t *testing.T) {
	client, ns, env := kubeCluster(t)
	s := startServer(t, t.TempDir(), serveEnv(append(env, "CUBICLE_ADMIN_KEY="+serveAdminKey)...))
	eventually(t, "a pooled pod", 2*time.Minute, func() bool {
		return len(pods(t, client, ns, "cubicle.dev/state=pool")) == 1
	})
	var c struct {
		ID string `json:"id"`
	}
	s.decode("POST", "/v1/computers", "", 201, &c)
	var ex struct {
		ExitCode int    `json:"exit_code"`
		Stdout   string `json:"stdout"`
	}
	s.decode("POST", "/v1/computers/"+c.ID+"/exec", `{"command":"id -u; pwd"}`, 200, &ex)
	if ex.ExitCode != 0 || ex.Stdout != "1000\n/workspace\n" {
		t.Fatalf("exec: %+v", ex)
	}
	if r := s.do("PUT", "/v1/computers/"+c.ID+"/files/hello.txt", "from the api"); r.code/100 != 2 {
		t.Fatalf("put a file: %d %s", r.code, r.body)
	}
	var py struct {
		Status string `json:"status"`
		Cells  []struct {
			Outputs []struct {
				Text string `json:"text"`
			} `json:"outputs"`
		} `json:"cells"`
	}
	s.decode("POST", "/v1/computers/"+c.ID+"/python", `{"cells":[{"code":"print(open('/workspace/hello.txt').read())"}]}`, 200, &py)
	if py.Status != "ok" || len(py.Cells) != 1 || len(py.Cells[0].Outputs) == 0 || py.Cells[0].Outputs[0].Text != "from the api\n" {
		t.Fatalf("python: %+v", py)
	}
	if r := s.do("POST", "/v1/computers", `{"network_policy":{"allowed_domains":["example.com"]}}`); r.code != 422 && r.code != 400 && r.code != 403 {
		t.Errorf("an internet computer: %d %s", r.code, r.body)
	}
	pod := "cmp-" + strings.TrimPrefix(c.ID, "cmp_")
	s.decode("DELETE", "/v1/computers/"+c.ID, "", 204, nil)
	eventually(t, "the deleted computer's pod gone", time.Minute, func() bool {
		for _, p := range pods(t, client, ns, "cubicle.dev/role=computer") {
			if p == pod {
				return false
			}
		}
		return true
	})
	s.stop()

	// kubernetes.agent_sandbox = "on" on this cluster, which serves no
	// agent-sandbox CRDs: the server does not start, and says why.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cubicleBin, "serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0")
	cmd.Env = serveEnv(append(env, "CUBICLE_ADMIN_KEY="+serveAdminKey, "CUBICLE_KUBERNETES_AGENT_SANDBOX=on")...)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), `kubernetes.agent_sandbox is "on" but the cluster does not serve agents.x-k8s.io/v1beta1 Sandbox`) {
		t.Errorf("serve with agent_sandbox on and no CRDs: %v\n%s", err, out)
	}
}

// TestServeKubernetesFleet: two replicas on one PostgreSQL database share
// the pods: a computer created through A answers exec through B; once A
// is killed, B marks it failed and deletes A's pods.
func TestServeKubernetesFleet(t *testing.T) {
	client, ns, env := kubeCluster(t)
	dbURL := postgresDB(t)
	replica := func() *server {
		addr := freeAddr(t)
		return startServer(t, t.TempDir(), serveEnv(append(env, "CUBICLE_ADMIN_KEY="+serveAdminKey,
			"CUBICLE_CLUSTER_LEASE_SECONDS=3", "CUBICLE_COMPUTERS_POOL_SIZE=0",
			"CUBICLE_CLUSTER_SECRET="+clusterSecret, "CUBICLE_CLUSTER_URL=http://"+addr)...), "--store", dbURL, "--listen", addr)
	}
	a := replica()
	b := replica()
	var c struct {
		ID      string `json:"id"`
		Status  string `json:"status"`
		Failure string `json:"failure"`
	}
	a.decode("POST", "/v1/computers", "", 201, &c)
	var ex struct {
		Stdout string `json:"stdout"`
	}
	b.decode("POST", "/v1/computers/"+c.ID+"/exec", `{"command":"echo through b"}`, 200, &ex)
	if ex.Stdout != "through b\n" {
		t.Fatalf("exec through B: %+v", ex)
	}
	// (The isolation probes' pods come and go beside it.)
	byID := "cubicle.dev/computer=" + c.ID
	if n := len(pods(t, client, ns, byID)); n != 1 {
		t.Fatalf("%d pods of %s, want 1", n, c.ID)
	}
	a.kill()
	eventually(t, "B marks A's computer failed", 30*time.Second, func() bool {
		b.decode("GET", "/v1/computers/"+c.ID, "", 200, &c)
		return c.Status == "failed"
	})
	eventually(t, "B deletes A's pod", 30*time.Second, func() bool {
		return len(pods(t, client, ns, byID)) == 0
	})
	b.stop()
}
