package kubetest

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The cluster's address ranges: documentation ranges (RFC 5737), never
// routed anywhere. Service addresses are only allocated (nothing proxies
// them); NodeIP is only the node's status.
var (
	ServiceRange = netip.MustParsePrefix("203.0.113.0/24")
	NodeIP       = netip.MustParseAddr("198.51.100.1")
)

// Cluster is a running control plane: etcd, kube-apiserver,
// kube-controller-manager, kwok and one fake node.
type Cluster struct {
	// Host is the API server's URL, https://127.0.0.1:PORT.
	Host string
	// CAPEM is the certificate of the cluster's CA, which signed the API
	// server's serving certificate and the admin's client certificate.
	CAPEM []byte
	// CertPEM and KeyPEM are the admin's client certificate (group
	// system:masters) and its key.
	CertPEM, KeyPEM []byte
	// Kubeconfig is the path of a kubeconfig file with Host and the
	// admin's credentials (for client-go's clientcmd).
	Kubeconfig string
	// Node is the name of the fake node every pod is bound to.
	Node string

	dir    string
	client *http.Client
	procs  []*proc // in start order: etcd, kube-apiserver, kube-controller-manager, kwok
	node   *node
	stop   sync.Once
}

// Start starts a cluster for one test and stops it when the test ends
// (t.Cleanup). Binaries missing fail the test, saying how to build them.
func Start(t testing.TB) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := New(ctx)
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kubetest: the cluster's logs (ends):\n%s", c.Logs(30))
		}
		c.Stop()
	})
	return c
}

// New starts a cluster, ready when it returns: the API server answers,
// the node is Ready and the default namespace has its service account.
// Stop ends it. A port taken by another process between its choice and
// its use makes New start again (three tries).
func New(ctx context.Context) (*Cluster, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	for try := 1; ; try++ {
		c, err := boot(ctx, bin)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, errPortTaken) || try == 3 {
			return nil, err
		}
	}
}

var errPortTaken = errors.New("a port was taken")

var binDir struct {
	once sync.Once
	dir  string
	err  error
}

// BinDir is the directory of the control plane's binaries: the one
// $CUBICLE_KUBE_BIN names, or the cache of scripts/kube.sh when that
// script finds it current ("kube.sh --check" builds nothing).
func BinDir() (string, error) {
	if d := os.Getenv("CUBICLE_KUBE_BIN"); d != "" {
		return d, nil
	}
	binDir.once.Do(func() {
		root, err := repoRoot()
		if err != nil {
			binDir.err = err
			return
		}
		var stderr strings.Builder
		cmd := exec.Command("bash", filepath.Join(root, "scripts", "kube.sh"), "--check")
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			binDir.err = fmt.Errorf("the Kubernetes control plane is not built (make test builds it: scripts/testdeps.sh runs scripts/kube.sh; ~16 minutes cold, cached after): %v: %s", err, strings.TrimSpace(stderr.String()))
			return
		}
		binDir.dir = strings.TrimSpace(string(out))
	})
	return binDir.dir, binDir.err
}

// repoRoot is the directory of the go.mod above the working directory.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "scripts", "kube.sh")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no scripts/kube.sh above the working directory: set CUBICLE_KUBE_BIN to the control plane's binaries")
		}
		dir = parent
	}
}

func boot(ctx context.Context, bin string) (c *Cluster, err error) {
	dir, err := os.MkdirTemp("", "cubicle-kube-")
	if err != nil {
		return nil, err
	}
	c = &Cluster{dir: dir, Node: "kubetest-node"}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	first := ServiceRange.Addr().Next()
	p, err := newPKI(net.IP(first.AsSlice()))
	if err != nil {
		return nil, err
	}
	files, err := p.write(dir)
	if err != nil {
		return nil, err
	}
	c.CAPEM, c.CertPEM, c.KeyPEM = p.caPEM, p.adminPEM, p.adminKeyPEM
	if c.client, err = newHTTPClient(c.CAPEM, c.CertPEM, c.KeyPEM); err != nil {
		return nil, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	etcdURL, peerURL := "http://"+hostPort(ports[0]), "http://"+hostPort(ports[1])
	c.Host = "https://" + hostPort(ports[2])

	etcd, err := c.start(bin, "etcd",
		"--name=kubetest", "--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=kubetest="+peerURL,
		"--unsafe-no-fsync", "--log-level=warn")
	if err != nil {
		return nil, err
	}
	if err := c.wait(ctx, etcd, time.Minute, func(ctx context.Context) error {
		return getOK(ctx, http.DefaultClient, etcdURL+"/health")
	}); err != nil {
		return nil, err
	}

	api, err := c.start(bin, "kube-apiserver",
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", ports[2]),
		"--cert-dir="+filepath.Join(dir, "apiserver"),
		"--tls-cert-file="+files["apiserver.crt"], "--tls-private-key-file="+files["apiserver.key"],
		"--client-ca-file="+files["ca.crt"],
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+files["sa.pub"], "--service-account-signing-key-file="+files["sa.key"],
		"--authorization-mode=Node,RBAC",
		"--service-cluster-ip-range="+ServiceRange.String(),
		// The kubernetes Service's endpoints would be 127.0.0.1, which
		// Endpoints refuse: no reconciler.
		"--endpoint-reconciler-type=none",
		"--enable-priority-and-fairness=false", "--profiling=false")
	if err != nil {
		return nil, err
	}
	if err := c.wait(ctx, api, 2*time.Minute, func(ctx context.Context) error {
		return getOK(ctx, c.client, c.Host+"/readyz")
	}); err != nil {
		return nil, err
	}
	if c.Kubeconfig, err = c.writeKubeconfig(); err != nil {
		return nil, err
	}

	kcm, err := c.start(bin, "kube-controller-manager",
		"--kubeconfig="+c.Kubeconfig,
		// What a test notices missing: the default service account of a
		// new namespace, namespace deletion, owner references' garbage
		// collection, the root CA config map pods mount.
		"--controllers=serviceaccount-controller,serviceaccount-token-controller,namespace-controller,garbage-collector-controller,root-ca-certificate-publisher-controller",
		"--service-account-private-key-file="+files["sa.key"], "--root-ca-file="+files["ca.crt"],
		"--leader-elect=false", "--secure-port=0", "--use-service-account-credentials=false")
	if err != nil {
		return nil, err
	}

	if err := c.createNode(ctx); err != nil {
		return nil, err
	}
	kwokConfig := filepath.Join(dir, "kwok.yaml")
	if err := os.WriteFile(kwokConfig, []byte(kwokStages), 0o600); err != nil {
		return nil, err
	}
	kwok, err := c.start(bin, "kwok",
		"--kubeconfig="+c.Kubeconfig, "--config="+kwokConfig,
		"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector="+nodeAnnotation+"=fake",
		"--node-ip="+NodeIP.String(), "--cidr=198.51.100.0/24")
	if err != nil {
		return nil, err
	}
	if err := c.wait(ctx, kwok, time.Minute, c.nodeReady); err != nil {
		return nil, err
	}
	if err := c.wait(ctx, kcm, time.Minute, func(ctx context.Context) error {
		return c.Do(ctx, http.MethodGet, "/api/v1/namespaces/default/serviceaccounts/default", nil, nil)
	}); err != nil {
		return nil, err
	}
	c.node = startNode(c, filepath.Join(dir, "node.log"))
	return c, nil
}

// start starts one process; it counts as the cluster's from then on.
func (c *Cluster) start(bin, name string, args ...string) (*proc, error) {
	p, err := start(c.dir, bin, name, args...)
	if err != nil {
		return nil, err
	}
	c.procs = append(c.procs, p)
	return p, nil
}

// wait polls ready until it succeeds, p exits (an error with its log), or
// the time runs out.
func (c *Cluster) wait(ctx context.Context, p *proc, limit time.Duration, ready func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		err := ready(ctx)
		if err == nil {
			return nil
		}
		if p.exited() {
			if strings.Contains(p.tail(40), "address already in use") {
				return fmt.Errorf("%w: %w", errPortTaken, p.failure())
			}
			return p.failure()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready within %s: %v\n%s", p.name, limit, err, p.tail(40))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func getOK(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// writeKubeconfig writes the admin's kubeconfig (JSON, which YAML
// readers take too) into the cluster's directory.
func (c *Cluster) writeKubeconfig() (string, error) {
	b64 := base64.StdEncoding.EncodeToString
	conf := fmt.Sprintf(`{"apiVersion": "v1", "kind": "Config",
 "clusters": [{"name": "kubetest", "cluster": {"server": %q, "certificate-authority-data": %q}}],
 "users": [{"name": "admin", "user": {"client-certificate-data": %q, "client-key-data": %q}}],
 "contexts": [{"name": "kubetest", "context": {"cluster": "kubetest", "user": "admin"}}],
 "current-context": "kubetest"}
`, c.Host, b64(c.CAPEM), b64(c.CertPEM), b64(c.KeyPEM))
	path := filepath.Join(c.dir, "kubeconfig")
	return path, os.WriteFile(path, []byte(conf), 0o600)
}

// PIDs are the control plane's processes (each the leader of its process
// group), for a test that checks Stop left none.
func (c *Cluster) PIDs() []int {
	var pids []int
	for _, p := range c.procs {
		pids = append(pids, p.cmd.Process.Pid)
	}
	return pids
}

// Logs is the end (last n lines) of each process's log and the node's.
func (c *Cluster) Logs(n int) string {
	var b strings.Builder
	for _, p := range c.procs {
		fmt.Fprintf(&b, "--- %s\n%s\n", p.name, p.tail(n))
	}
	if c.node != nil {
		fmt.Fprintf(&b, "--- node\n%s\n", (&proc{log: c.node.logPath}).tail(n))
	}
	return b.String()
}

// Stop ends the cluster: the node stops every pod's Kubelet (their stop
// functions run), then the processes end, last started first, and the
// cluster's directory is removed. It may be called more than once.
func (c *Cluster) Stop() {
	c.stop.Do(func() {
		if c.node != nil {
			c.node.close()
		}
		for i := len(c.procs) - 1; i >= 0; i-- {
			c.procs[i].stop(10 * time.Second)
		}
		if c.client != nil {
			c.client.CloseIdleConnections()
		}
		os.RemoveAll(c.dir)
	})
}

// Namespace creates a namespace for one test, ready for pods (the
// controller manager made its default service account), and deletes it
// when the test ends (its pods stop first).
func (c *Cluster) Namespace(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := fmt.Sprintf("kt-%08x", rand.Uint32())
	ns := map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name}}
	if err := c.Do(ctx, http.MethodPost, "/api/v1/namespaces", ns, nil); err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	t.Cleanup(func() { c.Do(context.Background(), http.MethodDelete, "/api/v1/namespaces/"+name, nil, nil) })
	for {
		err := c.Do(ctx, http.MethodGet, "/api/v1/namespaces/"+name+"/serviceaccounts/default", nil, nil)
		if err == nil {
			return name
		}
		select {
		case <-ctx.Done():
			t.Fatalf("kubetest: namespace %s has no default service account: %v", name, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
