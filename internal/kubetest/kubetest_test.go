package kubetest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/kubetest"
)

// server answers each TCP connection on :8080 with its argument (the
// pod's name), then closes it.
const server = `import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 8080))
s.listen()
while True:
    c, _ = s.accept()
    c.sendall(sys.argv[1].encode())
    c.close()
`

// kubelet runs each pod as a real process in a network namespace of its
// own and records what it started and stopped.
type kubelet struct {
	t       *testing.T
	mu      sync.Mutex
	ips     map[string]netip.Addr // by pod name
	stopped map[string]bool
}

func (k *kubelet) run(ctx context.Context, pod kubetest.Pod) (netip.Addr, func(), error) {
	if msg := pod.Annotations["test/fail"]; msg != "" {
		return netip.Addr{}, nil, errors.New(msg)
	}
	pn, cmd, err := serve(ctx, pod.Name)
	if err != nil {
		return netip.Addr{}, nil, err
	}
	k.mu.Lock()
	k.ips[pod.Name] = pn.Addr
	k.mu.Unlock()
	return pn.Addr, func() {
		cmd.Process.Kill()
		cmd.Wait()
		if err := pn.Close(); err != nil {
			k.t.Errorf("pod network of %s: %v", pod.Name, err)
		}
		k.mu.Lock()
		k.stopped[pod.Name] = true
		k.mu.Unlock()
	}, nil
}

// serve makes a pod network and starts server in it.
func serve(ctx context.Context, name string) (*kubetest.PodNet, *exec.Cmd, error) {
	pn, err := kubetest.NewPodNet(ctx)
	if err != nil {
		return nil, nil, err
	}
	cmd := pn.Command(context.Background(), "/usr/bin/python3", "-c", server, name)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		pn.Close()
		return nil, nil, err
	}
	return pn, cmd, nil
}

// TestPodNet: two pod networks at once get distinct address pairs; the
// host reaches a process listening in each at its address; Close removes
// the namespace and the host's link.
func TestPodNet(t *testing.T) {
	ctx := context.Background()
	a, cmdA, err := serve(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	b, cmdB, err := serve(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if a.Addr == b.Addr || a.Host == b.Host || !a.Addr.Is4() || a.Addr.As4()[2] != 2 {
		t.Fatalf("addresses %v/%v and %v/%v", a.Addr, a.Host, b.Addr, b.Host)
	}
	if got := dial(t, a.Addr); got != "a" {
		t.Fatalf("a answered %q", got)
	}
	if got := dial(t, b.Addr); got != "b" {
		t.Fatalf("b answered %q", got)
	}
	for _, x := range []struct {
		pn  *kubetest.PodNet
		cmd *exec.Cmd
	}{{a, cmdA}, {b, cmdB}} {
		x.cmd.Process.Kill()
		x.cmd.Wait()
		if err := x.pn.Close(); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("ip", "netns", "list").CombinedOutput(); err != nil || strings.Contains(string(out), x.pn.Name+" ") || strings.Contains(string(out), x.pn.Name+"\n") {
			t.Fatalf("namespace %s after Close: %v %s", x.pn.Name, err, out)
		}
		if out, err := exec.Command("ip", "-o", "addr", "show", "to", x.pn.Host.String()+"/32").CombinedOutput(); err != nil || len(out) != 0 {
			t.Fatalf("the host end of %s after Close: %v %s", x.pn.Name, err, out)
		}
	}
}

type podStatus struct {
	Spec struct {
		NodeName string
	}
	Status struct {
		Phase, Reason, Message, PodIP string
		Conditions                    []struct{ Type, Status string }
	}
}

func (p podStatus) ready() bool {
	for _, c := range p.Status.Conditions {
		if c.Type == "Ready" {
			return c.Status == "True"
		}
	}
	return false
}

// waitPod polls a pod until cond holds (or the pod is gone when cond is
// nil) and returns it.
func waitPod(t *testing.T, c *kubetest.Cluster, path string, cond func(podStatus) bool) podStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for {
		var p podStatus
		err := c.Do(ctx, http.MethodGet, path, nil, &p)
		switch {
		case cond == nil && kubetest.IsNotFound(err):
			return p
		case err == nil && cond != nil && cond(p):
			return p
		case err != nil && !kubetest.IsNotFound(err) && ctx.Err() == nil:
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not there within 90 s: last %+v, %v", path, p, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func pod(name string, annotations map[string]string, runtimeClass string) map[string]any {
	spec := map[string]any{
		"automountServiceAccountToken": false,
		"containers":                   []any{map[string]any{"name": "agent", "image": "cubicle-agent:test"}},
	}
	if runtimeClass != "" {
		spec["runtimeClassName"] = runtimeClass
	}
	return map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": name, "annotations": annotations}, "spec": spec}
}

// TestCluster: a pod created through the API server is bound to the node,
// its Kubelet starts a real process in a network namespace, and the pod
// turns Running and Ready with that namespace's address, where the
// process answers; deleting the pod stops the process before the pod is
// gone. A Kubelet's error fails its pod; the objects the Kubernetes
// driver creates (RuntimeClass, NetworkPolicy) are accepted, a pod of a
// missing RuntimeClass is refused; Stop leaves no process behind.
func TestCluster(t *testing.T) {
	c := kubetest.Start(t)
	pids := c.PIDs()
	if len(pids) != 4 {
		t.Fatalf("processes %v, want etcd, kube-apiserver, kube-controller-manager, kwok", pids)
	}
	k := &kubelet{t: t, ips: map[string]netip.Addr{}, stopped: map[string]bool{}}
	c.OnPodBound(k.run)
	ns := c.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pods := "/api/v1/namespaces/" + ns + "/pods"

	if err := c.Do(ctx, http.MethodPost, pods, pod("agent-1", nil, ""), nil); err != nil {
		t.Fatal(err)
	}
	p := waitPod(t, c, pods+"/agent-1", func(p podStatus) bool { return p.Status.Phase == "Running" && p.ready() })
	k.mu.Lock()
	ip := k.ips["agent-1"]
	k.mu.Unlock()
	if p.Spec.NodeName != c.Node || p.Status.PodIP != ip.String() || !ip.IsValid() {
		t.Fatalf("pod on %q at %q, want %q at the Kubelet's %v", p.Spec.NodeName, p.Status.PodIP, c.Node, ip)
	}
	if got := dial(t, ip); got != "agent-1" {
		t.Fatalf("the pod's IP answered %q, want its process's \"agent-1\"", got)
	}

	rc := map[string]any{"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
		"metadata": map[string]any{"name": "kubetest-gvisor"}, "handler": "runsc"}
	if err := c.Do(ctx, http.MethodPost, "/apis/node.k8s.io/v1/runtimeclasses", rc, nil); err != nil {
		t.Fatal(err)
	}
	np := map[string]any{"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
		"metadata": map[string]any{"name": "only-control-plane"},
		"spec": map[string]any{"podSelector": map[string]any{}, "policyTypes": []string{"Ingress", "Egress"},
			"ingress": []any{map[string]any{"from": []any{map[string]any{"ipBlock": map[string]any{"cidr": "127.0.0.1/32"}}}}}}}
	if err := c.Do(ctx, http.MethodPost, "/apis/networking.k8s.io/v1/namespaces/"+ns+"/networkpolicies", np, nil); err != nil {
		t.Fatal(err)
	}
	err := c.Do(ctx, http.MethodPost, pods, pod("no-class", nil, "missing"), nil)
	var apiErr *kubetest.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != http.StatusForbidden || !strings.Contains(apiErr.Message, "RuntimeClass") {
		t.Fatalf("a pod of a missing RuntimeClass: %v, want 403 naming the RuntimeClass", err)
	}
	if err := c.Do(ctx, http.MethodPost, pods, pod("broken", map[string]string{"test/fail": "no such image"}, "kubetest-gvisor"), nil); err != nil {
		t.Fatal(err)
	}
	p = waitPod(t, c, pods+"/broken", func(p podStatus) bool { return p.Status.Phase == "Failed" })
	if p.Status.Message != "no such image" || p.Status.PodIP != "" {
		t.Fatalf("a pod whose Kubelet failed: %+v", p.Status)
	}

	if err := c.Do(ctx, http.MethodDelete, pods+"/agent-1", nil, nil); err != nil {
		t.Fatal(err)
	}
	waitPod(t, c, pods+"/agent-1", nil)
	k.mu.Lock()
	stopped := k.stopped["agent-1"]
	k.mu.Unlock()
	if !stopped {
		t.Fatal("the pod is gone from the API, its Kubelet's stop has not run")
	}
	if conn, err := net.DialTimeout("tcp", netip.AddrPortFrom(ip, 8080).String(), time.Second); err == nil {
		conn.Close()
		t.Fatal("the deleted pod's address still answers")
	}

	c.Stop()
	for _, pid := range pids {
		if kubetest.GroupAlive(pid) {
			t.Errorf("process group %d outlived Stop", pid)
		}
	}
	if err := c.Do(context.Background(), http.MethodGet, "/version", nil, nil); err == nil {
		t.Error("the API server answers after Stop")
	}
}

// dial reads what the pod's address answers on :8080 (its process may
// take a moment to listen).
func dial(t *testing.T, ip netip.Addr) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", netip.AddrPortFrom(ip, 8080).String(), time.Second)
		if err == nil {
			conn.SetDeadline(time.Now().Add(5 * time.Second))
			b, err := io.ReadAll(io.LimitReader(conn, 1024))
			conn.Close()
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatal(fmt.Errorf("dial the pod: %w", err))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
