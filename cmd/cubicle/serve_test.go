package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/client"
)

// lockedBuffer collects a process's output while it runs.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// server is a running 'cubicle serve' subprocess.
type server struct {
	t      *testing.T
	cmd    *exec.Cmd
	url    string
	key    string
	stdout *lockedBuffer
	stderr *lockedBuffer
	done   chan struct{}
	err    error
}

const serveAdminKey = "cub_serve_test_admin_key_01"

var listenRe = regexp.MustCompile(`msg=serving listen=(\S+)`)

// serveEnv is the environment of a test server: small computers, a pool
// of one, and no CUBICLE_ variable of the caller's.
func serveEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CUBICLE_") {
			env = append(env, kv)
		}
	}
	return append(append(env, "CUBICLE_COMPUTERS_POOL_SIZE=1", "CUBICLE_COMPUTERS_DISK=32M",
		"CUBICLE_COMPUTERS_MEMORY=256M"), extra...)
}

// startServer runs 'cubicle serve' on a free port over dir (with more
// flags args) and waits until it listens (recovery of a previous server
// is done by then).
func startServer(t *testing.T, dir string, env []string, args ...string) *server {
	t.Helper()
	s := &server{t: t, stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, done: make(chan struct{}), key: serveAdminKey}
	s.cmd = exec.Command(cubicleBin, append([]string{"serve", "--data", dir, "--listen", "127.0.0.1:0"}, args...)...)
	s.cmd.Env = env
	s.cmd.Stdout, s.cmd.Stderr = s.stdout, s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.err = s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() { s.kill() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := listenRe.FindStringSubmatch(s.stderr.String()); m != nil {
			s.url = "http://" + m[1]
			return s
		}
		select {
		case <-s.done:
			t.Fatalf("cubicle serve exited (%v) before listening:\n%s", s.err, s.stderr)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("cubicle serve did not listen within 30 s:\n%s", s.stderr)
		}
	}
}

// kill sends SIGKILL, like a crash, and waits for the process to end.
func (s *server) kill() {
	select {
	case <-s.done:
		return
	default:
	}
	s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
}

// stop asks the server to shut down and fails unless it ends cleanly.
func (s *server) stop() {
	s.t.Helper()
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		s.t.Fatalf("cubicle serve did not stop within 30 s of SIGTERM:\n%s", s.stderr)
	}
	if s.err != nil {
		s.t.Fatalf("cubicle serve after SIGTERM: %v\n%s", s.err, s.stderr)
	}
}

type httpResult struct {
	code int
	body []byte
	hdr  http.Header
}

func (s *server) do(method, path string, body string) httpResult {
	s.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.url+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.key)
	c := &http.Client{Timeout: 60 * time.Second}
	res, err := c.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v\nserver log:\n%s", method, path, err, s.stderr)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return httpResult{res.StatusCode, b, res.Header}
}

// decode calls the server with the API's client (internal/client) and
// decodes the answer into v (nil: discard it); a status other than want
// fails the test.
func (s *server) decode(method, path, body string, want int, v any) {
	s.t.Helper()
	c, err := client.New(client.Config{URL: s.url, Key: s.key})
	if err != nil {
		s.t.Fatal(err)
	}
	var b any // nil: no body
	if body != "" {
		b = []byte(body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := c.Do(ctx, method, path, b, want, v); err != nil {
		s.t.Fatalf("%v\nserver log:\n%s", err, s.stderr)
	}
}

// procState reads a process's state letter and start time (clock ticks)
// from /proc; "" if it does not exist.
func procState(pid int) (string, uint64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(fields) < 20 {
		return "", 0
	}
	v, _ := strconv.ParseUint(fields[19], 10, 64)
	return fields[0], v
}

// running reports whether the process pid that started at start still
// runs (a zombie does not).
func running(pid int, start uint64) bool {
	state, st := procState(pid)
	return st == start && state != "Z" && state != "X"
}

// childrenOf lists the direct children of pid with their start times.
func childrenOf(pid int) map[int]uint64 {
	out := map[int]uint64{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if len(fields) > 19 && fields[1] == strconv.Itoa(pid) {
			st, _ := strconv.ParseUint(fields[19], 10, 64)
			out[child] = st
		}
	}
	return out
}

// processesWithCmdline counts host processes whose NUL-separated command
// line is exactly cmdline.
func processesWithCmdline(cmdline string) int {
	n := 0
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && string(b) == cmdline {
			n++
		}
	}
	return n
}

type usageRow struct {
	KeyID      string `json:"key_id"`
	ComputerID string `json:"computer_id"`
	Kind       string `json:"kind"`
	Quantity   int64  `json:"quantity"`
}

type auditEvent struct {
	Type       string         `json:"type"`
	KeyID      string         `json:"key_id"`
	ComputerID string         `json:"computer_id"`
	Data       map[string]any `json:"data"`
}

// counts returns, per computer, its usage rows and events by type, and the
// raw bodies.
func (s *server) counts(ids []string) (map[string][]usageRow, map[string]map[string]int, []byte) {
	s.t.Helper()
	var u struct {
		Data []usageRow `json:"data"`
	}
	ur := s.do("GET", "/v1/usage", "")
	if ur.code != 200 {
		s.t.Fatalf("usage: %d %s", ur.code, ur.body)
	}
	json.Unmarshal(ur.body, &u)
	var a struct {
		Data []auditEvent `json:"data"`
	}
	ar := s.do("GET", "/v1/audit", "")
	if ar.code != 200 {
		s.t.Fatalf("audit: %d %s", ar.code, ar.body)
	}
	json.Unmarshal(ar.body, &a)
	rows := map[string][]usageRow{}
	evs := map[string]map[string]int{}
	for _, id := range ids {
		evs[id] = map[string]int{}
	}
	for _, r := range u.Data {
		rows[r.ComputerID] = append(rows[r.ComputerID], r)
	}
	for _, e := range a.Data {
		if evs[e.ComputerID] != nil {
			evs[e.ComputerID][e.Type]++
			if e.Type == "computer.destroyed" && e.Data["reason"] != "server_restarted" {
				s.t.Fatalf("%s destroyed with reason %v, want server_restarted", e.ComputerID, e.Data["reason"])
			}
		}
	}
	return rows, evs, append(ur.body, ar.body...)
}

// gcAfter removes whatever the test's servers left on the host.
func gcAfter(t *testing.T, dir string) {
	t.Cleanup(func() {
		if r := cli(t, "gc", "--data", dir); r.code != 0 {
			t.Errorf("gc after the test: %d %s", r.code, r.stderr)
		}
	})
}

// TestServeKill9Recovery: after kill -9 of the server, the next start
// removes its computers (processes and directories), marks them destroyed
// and writes one usage row and one computer.destroyed event per computer —
// and a further restart writes nothing more. No command or file name
// reaches the log, the audit trail, usage or the database file.
func TestServeKill9Recovery(t *testing.T) {
	dir := t.TempDir()
	gcAfter(t, dir)
	env := serveEnv("CUBICLE_ADMIN_KEY=" + serveAdminKey)
	s1 := startServer(t, dir, env)
	if strings.Contains(s1.stdout.String(), serveAdminKey) {
		t.Fatalf("the admin key given in the environment was printed: %s", s1.stdout)
	}
	var ids []string
	for i := 0; i < 2; i++ {
		var v struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		}
		s1.decode("POST", "/v1/computers", "", 201, &v)
		if !strings.HasPrefix(v.ID, "cmp_") || v.Status != "ready" {
			t.Fatalf("created %+v", v)
		}
		ids = append(ids, v.ID)
	}
	var ex struct {
		ExitCode int    `json:"exit_code"`
		Stdout   string `json:"stdout"`
	}
	s1.decode("POST", "/v1/computers/"+ids[0]+"/exec", `{"command":"echo SECRET_CMD_MARKER; (exec sleep 1234) >/dev/null 2>&1 &"}`, 200, &ex)
	if ex.ExitCode != 0 || ex.Stdout != "SECRET_CMD_MARKER\n" {
		t.Fatalf("exec: %+v", ex)
	}
	s1.decode("PUT", "/v1/computers/"+ids[1]+"/files/SECRET_FILE_MARKER.txt", "SECRET_CONTENT_MARKER", 201, nil)
	const sleeper = "sleep\x001234\x00"
	for deadline := time.Now().Add(3 * time.Second); processesWithCmdline(sleeper) != 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d background sleeps run in the computer, want 1", processesWithCmdline(sleeper))
		}
	}

	// What the first server runs: its launcher and the launcher's children,
	// the agents, and the two computers' records.
	agents := map[int]uint64{}
	for launcher, start := range childrenOf(s1.cmd.Process.Pid) {
		agents[launcher] = start // it must die with the server too
		maps.Copy(agents, childrenOf(launcher))
	}
	for _, id := range ids {
		var rec struct {
			AgentPid   int    `json:"agent_pid"`
			AgentStart uint64 `json:"agent_start"`
		}
		b, err := os.ReadFile(filepath.Join(dir, "computers", id, "computer.json"))
		if err != nil {
			t.Fatalf("record of %s: %v", id, err)
		}
		json.Unmarshal(b, &rec)
		if rec.AgentPid == 0 || agents[rec.AgentPid] == 0 {
			t.Fatalf("agent of %s (%d) is not a child of the server's launcher (%v)", id, rec.AgentPid, agents)
		}
	}
	if len(agents) < 2 {
		t.Fatalf("the server runs %d agents", len(agents))
	}

	s1.kill()
	for _, id := range ids {
		if _, err := os.Stat(filepath.Join(dir, "computers", id)); err != nil {
			t.Fatalf("the crash did not leave %s behind (%v): nothing to recover", id, err)
		}
	}

	s2 := startServer(t, dir, env)
	for pid, start := range agents {
		if running(pid, start) {
			state, _ := procState(pid)
			t.Errorf("launcher or agent %d of the killed server still runs (state %s)", pid, state)
		}
	}
	if n := processesWithCmdline(sleeper); n != 0 {
		t.Errorf("%d processes of the killed server's computers still run", n)
	}
	for _, id := range ids {
		if _, err := os.Stat(filepath.Join(dir, "computers", id)); !os.IsNotExist(err) {
			t.Errorf("directory of %s after recovery: %v", id, err)
		}
		var v struct {
			Status string `json:"status"`
		}
		s2.decode("GET", "/v1/computers/"+id, "", 200, &v)
		if v.Status != "destroyed" {
			t.Errorf("%s after recovery: %s", id, v.Status)
		}
		if r := s2.do("POST", "/v1/computers/"+id+"/exec", `{"command":"true"}`); r.code != http.StatusConflict {
			t.Errorf("exec in recovered %s: %d %s", id, r.code, r.body)
		}
	}
	check := func(s *server, round string) []byte {
		t.Helper()
		rows, evs, bodies := s.counts(ids)
		for _, id := range ids {
			if len(rows[id]) != 1 || rows[id][0].Kind != "sandbox_seconds" || rows[id][0].Quantity < 0 {
				t.Errorf("%s: usage rows of %s: %+v", round, id, rows[id])
			}
			if evs[id]["computer.destroyed"] != 1 || evs[id]["computer.created"] != 1 {
				t.Errorf("%s: events of %s: %v", round, id, evs[id])
			}
		}
		return bodies
	}
	bodies := check(s2, "after the first restart")
	if t.Failed() {
		t.FailNow()
	}

	// Crash again, restart: nothing more is written.
	s2.kill()
	s3 := startServer(t, dir, env)
	bodies = append(bodies, check(s3, "after the second restart")...)
	s3.stop()

	// No command, file name or file content anywhere.
	for name, b := range map[string][]byte{
		"server 1 log": []byte(s1.stderr.String() + s1.stdout.String()),
		"server 2 log": []byte(s2.stderr.String() + s2.stdout.String()),
		"server 3 log": []byte(s3.stderr.String() + s3.stdout.String()),
		"audit/usage":  bodies,
	} {
		if bytes.Contains(b, []byte("MARKER")) {
			t.Errorf("%s contains a marker:\n%s", name, b)
		}
	}
	for _, f := range []string{"cubicle.db", "cubicle.db-wal"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("MARKER")) {
			t.Errorf("%s contains a marker", f)
		}
	}
}

var adminKeyRe = regexp.MustCompile(`admin key \(shown once[^)]*\): (cub_[0-9a-f]+)`)

// TestServePrintsAdminKeyOnce: without CUBICLE_ADMIN_KEY the first start
// prints a working admin key, a later start does not print one again; the
// server becomes ready once the isolation probe passed.
func TestServePrintsAdminKeyOnce(t *testing.T) {
	dir := t.TempDir()
	gcAfter(t, dir)
	s1 := startServer(t, dir, serveEnv())
	var key string
	deadline := time.Now().Add(5 * time.Second)
	for key == "" && time.Now().Before(deadline) {
		if m := adminKeyRe.FindStringSubmatch(s1.stdout.String()); m != nil {
			key = m[1]
		}
		time.Sleep(20 * time.Millisecond)
	}
	if key == "" {
		t.Fatalf("no admin key printed:\n%s", s1.stdout)
	}
	if strings.Contains(s1.stderr.String(), key) {
		t.Fatalf("the admin key is in the log")
	}
	s1.key = key
	if r := s1.do("GET", "/v1/computers", ""); r.code != 200 {
		t.Fatalf("the printed key: %d %s", r.code, r.body)
	}
	if r := s1.do("GET", "/healthz", ""); r.code != 200 {
		t.Fatalf("healthz: %d", r.code)
	}
	ready := false
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if r := s1.do("GET", "/readyz", ""); r.code == 200 {
			ready = true
			break
		} else if r.code != http.StatusServiceUnavailable {
			t.Fatalf("readyz: %d %s", r.code, r.body)
		}
	}
	if !ready {
		t.Fatalf("not ready within 20 s:\n%s", s1.stderr)
	}
	s1.stop()
	s2 := startServer(t, dir, serveEnv())
	s2.key = key
	if r := s2.do("GET", "/v1/computers", ""); r.code != 200 {
		t.Fatalf("the key after a restart: %d %s", r.code, r.body)
	}
	if strings.Contains(s2.stdout.String(), "admin key") {
		t.Fatalf("a second start printed an admin key: %s", s2.stdout)
	}
	s2.stop()
}

// TestServeBadConfigStops: a bad value stops 'cubicle serve' before it
// listens, with exit status 2 and a message naming the key.
func TestServeBadConfigStops(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "cubicle.toml")
	os.WriteFile(cfg, []byte("[computers]\npoolsize = 3\n"), 0o600)
	cases := []struct {
		env  []string
		args []string
		want string
	}{
		{[]string{"CUBICLE_COMPUTERS_MEMORY=lots"}, nil, "CUBICLE_COMPUTERS_MEMORY"},
		{[]string{"CUBICLE_COMPUTERS_POOLSIZE=3"}, nil, "CUBICLE_COMPUTERS_POOLSIZE"},
		{nil, []string{"--config", cfg}, "computers.poolsize"},
		{nil, []string{"--listen", "nowhere"}, "server.listen"},
	}
	for _, c := range cases {
		cmd := exec.Command(cubicleBin, append([]string{"serve", "--data", filepath.Join(dir, "data")}, c.args...)...)
		cmd.Env = serveEnv(c.env...)
		var errb bytes.Buffer
		cmd.Stderr = &errb
		err := cmd.Run()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 2 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("serve %v with %v: %v, stderr %q; want exit 2 naming %s", c.args, c.env, err, errb.String(), c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "cubicle.db")); !os.IsNotExist(err) {
		t.Errorf("a refused configuration created the database: %v", err)
	}
}

// firstOrg returns the id of the server's first organisation (the admin
// key's).
func (s *server) firstOrg(t *testing.T) string {
	t.Helper()
	var orgs struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	s.decode("GET", "/v1/admin/orgs", "", 200, &orgs)
	if len(orgs.Data) == 0 {
		t.Fatal("the server has no organisation")
	}
	return orgs.Data[0].ID
}
