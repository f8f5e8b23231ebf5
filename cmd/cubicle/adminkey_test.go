package main

import (
	"encoding/json"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// waitAdminKey is the admin key s printed, or "".
func waitAdminKey(s *server) string {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := adminKeyRe.FindStringSubmatch(s.stdout.String()); m != nil {
			return m[1]
		}
	}
	return ""
}

// TestServeAdminKeyNotLost: a start that fails before it listens (the port
// is taken) creates and prints no admin key, so the next start prints a
// working one; a CUBICLE_ADMIN_KEY the database does not know is ignored
// with a warning saying how to recover; 'cubicle keys create --admin'
// makes another admin key next to the running server.
func TestServeAdminKeyNotLost(t *testing.T) {
	dir := t.TempDir()
	gcAfter(t, dir)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cmd := exec.Command(cubicleBin, "serve", "--data", dir, "--listen", taken.Addr().String())
	cmd.Env = serveEnv()
	r := runCommand(t, cmd, []string{"serve on a taken port"})
	if r.code != 1 || !strings.Contains(r.stderr, "listen") || strings.Contains(r.stdout, "admin key") {
		t.Fatalf("serve on a taken port: exit %d\nstdout %q\nstderr %q", r.code, r.stdout, r.stderr)
	}

	s := startServer(t, dir, serveEnv())
	if s.key = waitAdminKey(s); s.key == "" {
		t.Fatalf("no admin key printed after a failed first start:\n%s", s.stdout)
	}
	s.decode("GET", "/v1/admin/orgs", "", 200, nil)
	s.stop()

	s = startServer(t, dir, serveEnv("CUBICLE_ADMIN_KEY=cub_not_the_admin_key_0001"))
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(s.stderr.String(), "CUBICLE_ADMIN_KEY is ignored"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no warning for an unknown CUBICLE_ADMIN_KEY:\n%s", s.stderr)
		}
	}
	if !strings.Contains(s.stderr.String(), "cubicle keys create --admin --data "+dir) {
		t.Fatalf("the warning does not say how to recover:\n%s", s.stderr)
	}

	if r := cli(t, "keys", "--help"); !strings.Contains(r.stderr+r.stdout, "keys create --admin --data") {
		t.Fatalf("keys --help has no --admin example: %s%s", r.stdout, r.stderr)
	}
	if r := cli(t, "keys", "create", "--admin", "--policy", `{"settings":{"redact_pii":true}}`, "--data", dir); r.code != 2 ||
		!strings.Contains(r.stderr, "--policy does not apply to --admin") {
		t.Fatalf("keys create --admin --policy was not refused: %+v", r)
	}
	r = cli(t, "keys", "create", "--admin", "--data", dir, "--json")
	var created struct {
		Key struct {
			Admin bool `json:"admin"`
		} `json:"key"`
		Secret string `json:"secret"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &created); r.code != 0 || err != nil || created.Secret == "" || !created.Key.Admin {
		t.Fatalf("keys create --admin: %+v (%v)", r, err)
	}
	s.key = created.Secret
	s.decode("GET", "/v1/admin/orgs", "", 200, nil) // an admin key of the running server
	s.stop()
	s = startServer(t, dir, serveEnv("CUBICLE_ADMIN_KEY="+created.Secret))
	s.key = created.Secret
	s.decode("GET", "/v1/admin/keys", "", 200, nil)
	s.stop()
	if strings.Contains(s.stderr.String(), "is ignored") {
		t.Fatalf("a known admin key in CUBICLE_ADMIN_KEY was warned about:\n%s", s.stderr)
	}
}
