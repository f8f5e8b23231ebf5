package podagent_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/agent"
	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/kube/podagent"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/kube/podtest"
	"github.com/cubicle-sandbox/cubicle/internal/testbin"
)

var bin string

func TestMain(m *testing.M) { os.Exit(testbin.Main(m, &bin)) }

// freeAddr is a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func identity(t *testing.T, name string) podagent.Identity {
	id, err := podagent.NewIdentity(name, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func fingerprint(t *testing.T, id podagent.Identity) string {
	fp, err := id.Fingerprint()
	if err != nil {
		t.Fatal(err)
	}
	return fp
}

// dial connects as client to the agent at addr pinning server, retrying
// while it starts.
func dial(t *testing.T, addr string, client podagent.Identity, serverFP string) (*tls.Conn, error) {
	cfg, err := podagent.ClientConfig(client, serverFP)
	if err != nil {
		t.Fatal(err)
	}
	var last error
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		raw, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			last = err
			continue
		}
		c := tls.Client(raw, cfg)
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if err := c.Handshake(); err != nil {
			raw.Close()
			return nil, err
		}
		// TLS 1.3: the server's verdict on the client certificate comes
		// with its first record; Handshake on the client does not wait for it.
		c.SetDeadline(time.Time{})
		return c, nil
	}
	return nil, last
}

// TestPodAgent: the control plane with the pinned client certificate
// drives the agent over TLS (exec as the sandbox user, files); a client
// with another certificate, and a second connection, are refused; the
// agent exits when its connection ends.
func TestPodAgent(t *testing.T) {
	server, client, stranger := identity(t, "cmp-test"), identity(t, "control-plane"), identity(t, "stranger")
	addr := freeAddr(t)
	a := podtest.Start(t, bin, "", addr, map[string][]byte{
		podagent.ServerCert: server.CertPEM, podagent.ServerKey: server.KeyPEM, podagent.ClientCerts: client.CertPEM})
	fp := fingerprint(t, server)

	// A stranger's certificate: the agent ends the connection.
	if c, err := dial(t, addr, stranger, fp); err == nil {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		_, werr := c.Write([]byte("x"))
		_, rerr := c.Read(make([]byte, 1))
		if werr == nil && rerr == nil {
			t.Fatal("a client with another certificate was served")
		}
		c.Close()
	}
	// The wrong server pin: our side refuses.
	if _, err := dial(t, addr, client, fingerprint(t, stranger)); err == nil {
		t.Fatal("connected to an agent whose certificate is not the pinned one")
	}

	conn, err := dial(t, addr, client, fp)
	if err != nil {
		t.Fatalf("dial: %v\n%s", err, a.Output())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := agent.Handshake(ctx, conn, protocol.Init{Timeout: protocol.Millis(30 * time.Second), MaxFile: 64 << 20,
		MemoryHint: 512 << 20, Python: sandbox.DefaultPython}); err != nil {
		t.Fatalf("handshake: %v\n%s", err, a.Output())
	}
	cl := agent.NewClient(conn)
	var out bytes.Buffer
	st, err := cl.Exec(ctx, sandbox.ExecRequest{Command: "id -u; grep -E '^(CapEff|NoNewPrivs)' /proc/self/status; pwd; cat /proc/self/oom_score_adj"}, sandbox.ExecIO{Stdout: &out})
	if err != nil || st.ExitCode != 0 {
		t.Fatalf("exec: %+v %v", st, err)
	}
	if got := strings.Fields(out.String()); len(got) != 7 || got[0] != "1000" || got[2] != "0000000000000000" || got[4] != "1" ||
		got[5] != "/workspace" || got[6] != "1000" {
		t.Errorf("identity %q, want uid 1000, no capabilities, no_new_privs, /workspace, first to be OOM-killed", out.String())
	}
	if _, err := cl.WriteFile(ctx, sandbox.FileWrite{Path: "a.txt", Mode: 0o644}, strings.NewReader("pod")); err != nil {
		t.Fatalf("write: %v", err)
	}
	out.Reset()
	if _, err := cl.Exec(ctx, sandbox.ExecRequest{Command: "cat a.txt; stat -c %u a.txt"}, sandbox.ExecIO{Stdout: &out}); err != nil || out.String() != "pod1000\n" {
		t.Errorf("the uploaded file: %q %v", out.String(), err)
	}

	// The agent keeps its port while it serves: another connection is
	// closed unread, even with the right certificate.
	if c, err := dial(t, addr, client, fp); err == nil {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Error("a second control connection was served")
		}
		c.Close()
	}
	if ln, err := net.Listen("tcp", addr); err == nil {
		ln.Close()
		t.Error("the agent's port was free while it served")
	}

	cl.Close()
	if !a.Exited(10 * time.Second) {
		t.Fatal("the agent did not exit when its control connection ended")
	}
	if _, err := cl.Exec(ctx, sandbox.ExecRequest{Command: "true"}, sandbox.ExecIO{}); !errors.Is(err, sandbox.ErrGone) {
		t.Errorf("exec after the end: %v, want ErrGone", err)
	}
}

// TestKeygen: the init container's keygen makes a key pair readable by
// its user only and publishes the certificate's fingerprint; it refuses a
// directory that has one already; LoadTLS takes the pair from its own
// directory and the control plane's certificate from the Secret's.
func TestKeygen(t *testing.T) {
	dir, tlsDir := t.TempDir(), t.TempDir()
	term := filepath.Join(t.TempDir(), "termination-log")
	if err := podagent.Keygen(dir, term); err != nil {
		t.Fatal(err)
	}
	msg, err := os.ReadFile(term)
	if err != nil {
		t.Fatal(err)
	}
	fp, err := podagent.ParseFingerprint(string(msg))
	if err != nil {
		t.Fatalf("published %q: %v", msg, err)
	}
	cert, err := os.ReadFile(filepath.Join(dir, podagent.ServerCert))
	if err != nil {
		t.Fatal(err)
	}
	if got := fingerprint(t, podagent.Identity{CertPEM: cert}); got != fp {
		t.Errorf("published %s, the certificate's is %s", fp, got)
	}
	if st, err := os.Stat(filepath.Join(dir, podagent.ServerKey)); err != nil || st.Mode().Perm() != 0o400 {
		t.Errorf("key file %v %v, want mode 0400", st, err)
	}
	if err := podagent.Keygen(dir, term); err == nil {
		t.Error("keygen replaced an identity")
	}
	client := identity(t, "control-plane")
	os.WriteFile(filepath.Join(tlsDir, podagent.ClientCerts), client.CertPEM, 0o400)
	if _, err := podagent.LoadTLS(tlsDir, dir); err != nil {
		t.Errorf("LoadTLS with an identity directory: %v", err)
	}
	if _, err := podagent.LoadTLS(tlsDir, ""); err == nil {
		t.Error("LoadTLS without the pod's key pair")
	}
	for _, bad := range []string{"", "xyz", strings.Repeat("A", 64), strings.Repeat("a", 63)} {
		if _, err := podagent.ParseFingerprint(bad); err == nil {
			t.Errorf("ParseFingerprint(%q) passed", bad)
		}
	}
}
