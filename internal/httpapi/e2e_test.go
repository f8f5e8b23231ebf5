package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/client"
	"github.com/cubicle-sandbox/cubicle/internal/computer"
)

// TestComputerLifecycle: create → 201 with the whole computer object; list
// (alive by default, ?status=all with destroyed ones); get; delete → 204,
// again → 409 with the OpenAI-style error; a deleted computer reads as
// destroyed.
func TestComputerLifecycle(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r := e.do(e.admin, "POST", "/v1/computers", map[string]any{"metadata": map[string]string{"purpose": "lifecycle"}})
	if r.code != http.StatusCreated {
		t.Fatalf("create: %s", r)
	}
	var raw map[string]json.RawMessage
	r.json(t, &raw)
	for _, k := range []string{"id", "object", "status", "created_at", "ready_at", "expires_at", "limits", "metadata"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("computer object lacks %q: %s", k, r)
		}
	}
	var a view
	r.json(t, &a)
	if !strings.HasPrefix(a.ID, "cmp_") || a.Object != "computer" || a.Status != "ready" {
		t.Fatalf("computer %+v", a)
	}
	now := time.Now().Unix()
	if a.CreatedAt < now-60 || a.CreatedAt > now+1 || a.ReadyAt == nil || *a.ReadyAt < a.CreatedAt {
		t.Fatalf("times: created %d ready %v now %d", a.CreatedAt, a.ReadyAt, now)
	}
	if a.ExpiresAt != *a.ReadyAt+600 {
		t.Fatalf("expires_at %d, want ready_at %d + 600", a.ExpiresAt, *a.ReadyAt)
	}
	want := client.Limits{MemoryMB: 256, CPUs: 1, Pids: 128, DiskMB: 32, LifetimeSeconds: 600, ExecTimeoutSeconds: 30}
	if a.Limits != want {
		t.Fatalf("limits %+v, want %+v", a.Limits, want)
	}
	if a.Metadata["purpose"] != "lifecycle" || len(a.Metadata) != 1 {
		t.Fatalf("metadata %v", a.Metadata)
	}
	b := e.create(e.admin, map[string]any{})

	list := func(q string) map[string]view {
		t.Helper()
		r := e.do(e.admin, "GET", "/v1/computers"+q, nil)
		if r.code != http.StatusOK {
			t.Fatalf("list%s: %s", q, r)
		}
		var l struct {
			Object string `json:"object"`
			Data   []view `json:"data"`
		}
		r.json(t, &l)
		if l.Object != "list" {
			t.Fatalf("list object %q", l.Object)
		}
		out := map[string]view{}
		for _, v := range l.Data {
			out[v.ID] = v
		}
		return out
	}
	if l := list(""); len(l) != 2 || l[a.ID].Status != "ready" || l[b.ID].Status != "ready" {
		t.Fatalf("alive list %+v", l)
	}
	if g := e.get(e.admin, a.ID); g.ID != a.ID || g.Status != "ready" || g.Limits != want || g.ExpiresAt != a.ExpiresAt {
		t.Fatalf("get %+v, want %+v", g, a)
	}

	if r := e.do(e.admin, "DELETE", "/v1/computers/"+a.ID, nil); r.code != http.StatusNoContent || len(r.body) != 0 {
		t.Fatalf("delete: %s", r)
	}
	e.do(e.admin, "DELETE", "/v1/computers/"+a.ID, nil).wantError(t, http.StatusConflict, "computer_gone")
	if g := e.get(e.admin, a.ID); g.Status != "destroyed" {
		t.Fatalf("deleted computer reads %q, want destroyed", g.Status)
	}
	if l := list(""); len(l) != 1 || l[b.ID].ID == "" {
		t.Fatalf("alive list after delete %+v", l)
	}
	if l := list("?status=alive"); len(l) != 1 || l[b.ID].ID == "" {
		t.Fatalf("?status=alive after delete %+v", l)
	}
	if l := list("?status=all"); len(l) != 2 || l[a.ID].Status != "destroyed" || l[b.ID].Status != "ready" {
		t.Fatalf("?status=all %+v", l)
	}
	if l := list("?response_id=resp_nothing"); len(l) != 0 {
		t.Fatalf("?response_id= of no response: %+v", l)
	}
	e.do(e.admin, "POST", "/v1/computers/"+a.ID+"/exec", map[string]any{"command": "true"}).wantError(t, http.StatusConflict, "computer_gone")
	e.do(e.admin, "GET", "/v1/computers/cmp_000000000000000000000000", nil).wantError(t, http.StatusNotFound, "not_found")
	e.do(e.admin, "DELETE", "/v1/computers/cmp_000000000000000000000000", nil).wantError(t, http.StatusNotFound, "not_found")
	if p := e.do(e.admin, "GET", "/v1/computers?status=bogus", nil).wantError(t, http.StatusBadRequest, "invalid_request"); p.Error.Param == nil || *p.Error.Param != "status" {
		t.Fatalf("?status=bogus param %v", p.Error.Param)
	}
	// The survivor still works.
	if out := e.sh(e.admin, b.ID, "echo alive"); out != "alive\n" {
		t.Fatalf("exec in the other computer: %q", out)
	}
}

// TestComputerMetadataIsAnObject: a computer created without metadata has
// "metadata": {} in its object (as View intends), never null.
func TestComputerMetadataIsAnObject(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for _, body := range []any{nil, map[string]any{}} {
		r := e.do(e.admin, "POST", "/v1/computers", body)
		if r.code != http.StatusCreated {
			t.Fatalf("create: %s", r)
		}
		var raw map[string]json.RawMessage
		r.json(t, &raw)
		if got := strings.TrimSpace(string(raw["metadata"])); got != "{}" {
			t.Errorf("create with body %v: metadata is %s, want {}", body, got)
		}
	}
}

// TestExecUnary covers exit codes, both streams, argv, stdin, env, cwd,
// timeouts, OOM and truncation of output beyond max_output_bytes.
func TestExecUnary(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *computer.Config) { c.MaxOutputBytes = 4096 })
	id := e.create(e.admin, nil).ID

	if r := e.exec(e.admin, id, map[string]any{"command": "echo out; echo err >&2; exit 7"}); r.ExitCode != 7 || r.Stdout != "out\n" || r.Stderr != "err\n" || r.TimedOut || r.OOMKilled || r.StdoutTruncated || r.StderrTruncated {
		t.Fatalf("exit 7: %+v", r)
	}
	if r := e.exec(e.admin, id, map[string]any{"argv": []string{"printf", "%s|", "a b", "$HOME", "c"}}); r.ExitCode != 0 || r.Stdout != "a b|$HOME|c|" {
		t.Fatalf("argv is not passed verbatim: %+v", r)
	}
	if r := e.exec(e.admin, id, map[string]any{"argv": []string{"cat"}, "stdin": "hello\nworld"}); r.ExitCode != 0 || r.Stdout != "hello\nworld" {
		t.Fatalf("stdin: %+v", r)
	}
	if r := e.exec(e.admin, id, map[string]any{"command": "wc -c"}); r.ExitCode != 0 || strings.TrimSpace(r.Stdout) != "0" {
		t.Fatalf("no stdin must read as empty: %+v", r)
	}
	if r := e.exec(e.admin, id, map[string]any{"command": `printf '%s|%s' "$FOO" "$BAR"`, "env": map[string]string{"FOO": "bar baz", "BAR": "x=y"}}); r.Stdout != "bar baz|x=y" {
		t.Fatalf("env: %+v", r)
	}
	e.sh(e.admin, id, "mkdir -p sub/dir")
	if r := e.exec(e.admin, id, map[string]any{"command": "pwd", "cwd": "sub/dir"}); r.Stdout != "/workspace/sub/dir\n" {
		t.Fatalf("relative cwd: %+v", r)
	}
	if r := e.exec(e.admin, id, map[string]any{"command": "pwd", "cwd": "/tmp"}); r.Stdout != "/tmp\n" {
		t.Fatalf("absolute cwd: %+v", r)
	}
	if r := e.exec(e.admin, id, map[string]any{"command": "pwd"}); r.Stdout != "/workspace\n" {
		t.Fatalf("default cwd: %+v", r)
	}
	e.do(e.admin, "POST", "/v1/computers/"+id+"/exec", map[string]any{"command": "pwd", "cwd": "no/such/dir"}).wantError(t, http.StatusBadRequest, "")
	e.do(e.admin, "POST", "/v1/computers/"+id+"/exec", map[string]any{"argv": []string{"/no/such/program"}}).wantError(t, http.StatusBadRequest, "")

	// Timeout: output written before it is kept; the stderr says so.
	start := time.Now()
	r := e.exec(e.admin, id, map[string]any{"command": "echo before; sleep 20", "timeout_seconds": 1})
	if !r.TimedOut || r.Stdout != "before\n" || !strings.Contains(r.Stderr, "timed out after 1 seconds") {
		t.Fatalf("timeout: %+v", r)
	}
	if took := time.Since(start); took > 8*time.Second {
		t.Fatalf("a 1 s timeout took %v", took)
	}

	// Truncation at max_output_bytes, each stream on its own.
	r = e.exec(e.admin, id, map[string]any{"command": "head -c 10000 /dev/zero | tr '\\0' a; echo small >&2"})
	if r.ExitCode != 0 || len(r.Stdout) != 4096 || strings.Trim(r.Stdout, "a") != "" || !r.StdoutTruncated || r.StderrTruncated || r.Stderr != "small\n" {
		t.Fatalf("stdout truncation: exit %d len %d truncated %v/%v stderr %q", r.ExitCode, len(r.Stdout), r.StdoutTruncated, r.StderrTruncated, r.Stderr)
	}
	r = e.exec(e.admin, id, map[string]any{"command": "head -c 5000 /dev/zero | tr '\\0' b >&2"})
	if len(r.Stderr) != 4096 || !r.StderrTruncated || r.StdoutTruncated {
		t.Fatalf("stderr truncation: len %d truncated %v/%v", len(r.Stderr), r.StdoutTruncated, r.StderrTruncated)
	}
	r = e.exec(e.admin, id, map[string]any{"command": "head -c 4096 /dev/zero | tr '\\0' c"})
	if len(r.Stdout) != 4096 || r.StdoutTruncated {
		t.Fatalf("exactly max_output_bytes is not truncated: len %d truncated %v", len(r.Stdout), r.StdoutTruncated)
	}

	// Validation.
	for _, body := range []map[string]any{
		{"command": "true", "argv": []string{"true"}},
		{},
		{"command": "true", "timeout_seconds": -1},
		{"command": "true", "env": map[string]string{"A=B": "x"}},
	} {
		e.do(e.admin, "POST", "/v1/computers/"+id+"/exec", body).wantError(t, http.StatusBadRequest, "invalid_request")
	}

	// OOM: a small computer and a memory bomb; the computer survives.
	small := e.create(e.admin, map[string]any{"memory_mb": 64})
	if small.Limits.MemoryMB != 64 {
		t.Fatalf("memory_mb 64 gave limits %+v", small.Limits)
	}
	r = e.exec(e.admin, small.ID, map[string]any{"argv": []string{"/usr/bin/python3", "-c", "s = 'x' * (400 << 20); print(len(s))"}})
	if !r.OOMKilled || r.ExitCode == 0 || strings.Contains(r.Stdout, "419430400") {
		t.Fatalf("memory bomb in a 64 MiB computer: %+v", r)
	}
	if out := e.sh(e.admin, small.ID, "echo survived"); out != "survived\n" {
		t.Fatalf("after OOM: %q", out)
	}
	if r := e.exec(e.admin, small.ID, map[string]any{"command": "true"}); r.OOMKilled {
		t.Fatalf("oom_killed sticks to the next process: %+v", r)
	}
}

// sseEvent is one Server-Sent Event with its arrival time.
type sseEvent struct {
	name string
	data string
	at   time.Time
}

// readSSE reads events with the API client's reader until the stream
// ends; onEvent may stop early. A broken stream fails the test.
func readSSE(t *testing.T, body io.Reader, onEvent func(sseEvent) bool) []sseEvent {
	t.Helper()
	var out []sseEvent
	r := client.NewEventReader(body, 0, 0)
	for {
		ev, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("event stream after %d events: %v", len(out), err)
		}
		cur := sseEvent{name: ev.Name, data: string(ev.Data), at: time.Now()}
		out = append(out, cur)
		if onEvent != nil && !onEvent(cur) {
			return out
		}
	}
}

// TestExecSSE: with Accept: text/event-stream, stdout and stderr arrive as
// they happen, in order, and the exit event carries the exit code.
func TestExecSSE(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.create(e.admin, nil).ID
	body := `{"command":"echo one; sleep 0.4; echo two >&2; sleep 0.4; echo three; exit 3"}`
	req, _ := http.NewRequest("POST", e.url+"/v1/computers/"+id+"/exec", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+e.admin)
	req.Header.Set("Accept", "text/event-stream")
	start := time.Now()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("SSE answer %d %q: %s", res.StatusCode, res.Header.Get("Content-Type"), b)
	}
	evs := readSSE(t, res.Body, nil)
	var got []string
	for _, ev := range evs {
		if ev.name == "exit" {
			got = append(got, "exit")
			continue
		}
		var d struct {
			Data string `json:"data"`
		}
		if err := json.Unmarshal([]byte(ev.data), &d); err != nil {
			t.Fatalf("event %s data %q: %v", ev.name, ev.data, err)
		}
		got = append(got, ev.name+":"+d.Data)
	}
	want := []string{"stdout:one\n", "stderr:two\n", "stdout:three\n", "exit"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events %q, want %q", got, want)
	}
	exit := evs[len(evs)-1]
	var st struct {
		ExitCode *int  `json:"exit_code"`
		TimedOut *bool `json:"timed_out"`
	}
	if err := json.Unmarshal([]byte(exit.data), &st); err != nil || st.ExitCode == nil || *st.ExitCode != 3 || st.TimedOut == nil || *st.TimedOut {
		t.Fatalf("exit event %q: %v", exit.data, err)
	}
	// Streaming, not buffering: the first line arrived well before the end.
	if gap := exit.at.Sub(evs[0].at); gap < 500*time.Millisecond {
		t.Fatalf("first event only %v before exit (total %v): output was buffered", gap, exit.at.Sub(start))
	}
	if gap := evs[2].at.Sub(evs[1].at); gap < 200*time.Millisecond {
		t.Fatalf("stderr and the last stdout arrived %v apart; want about 400ms", gap)
	}

	// Errors before the stream starts are plain JSON errors.
	e.do(e.admin, "DELETE", "/v1/computers/"+id, nil)
	r := e.doCtx(context.Background(), e.admin, "POST", "/v1/computers/"+id+"/exec", body, map[string]string{"Accept": "text/event-stream"})
	r.wantError(t, http.StatusConflict, "computer_gone")
}

// TestFiles: PUT raw bytes, GET them back, list, delete; an oversized
// upload is 413 and leaves the previous content intact.
func TestFiles(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *computer.Config) { c.MaxFileBytes = 64 << 10 })
	id := e.create(e.admin, nil).ID
	base := "/v1/computers/" + id + "/files/"

	content := make([]byte, 3000)
	for i := range content {
		content[i] = byte(i * 7)
	}
	r := e.do(e.admin, "PUT", base+"dir/sub/a.bin", content)
	if r.code != http.StatusCreated {
		t.Fatalf("put: %s", r)
	}
	var w struct {
		Path  string `json:"path"`
		Bytes int64  `json:"bytes"`
	}
	r.json(t, &w)
	if w.Path != "/workspace/dir/sub/a.bin" || w.Bytes != int64(len(content)) {
		t.Fatalf("put answer %+v", w)
	}
	r = e.do(e.admin, "GET", base+"dir/sub/a.bin", nil)
	if r.code != http.StatusOK || !bytes.Equal(r.body, content) || r.hdr.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("get: %d %q, %d bytes, equal %v", r.code, r.hdr.Get("Content-Type"), len(r.body), bytes.Equal(r.body, content))
	}
	if out := e.sh(e.admin, id, "wc -c < dir/sub/a.bin"); strings.TrimSpace(out) != "3000" {
		t.Fatalf("the computer sees %q bytes", out)
	}
	// The absolute form of the same path works too.
	if r := e.do(e.admin, "GET", base+"%2Fworkspace%2Fdir%2Fsub%2Fa.bin", nil); r.code != http.StatusOK || !bytes.Equal(r.body, content) {
		t.Fatalf("absolute /workspace path: %d", r.code)
	}
	// Written in the computer, read over HTTP.
	e.sh(e.admin, id, "printf 'from inside' > dir/inside.txt")
	if r := e.do(e.admin, "GET", base+"dir/inside.txt", nil); r.code != 200 || string(r.body) != "from inside" {
		t.Fatalf("get inside.txt: %s", r)
	}

	type entry struct {
		Name string `json:"name"`
		Path string `json:"path"`
		Type string `json:"type"`
		Size int64  `json:"size"`
	}
	listing := func(q string) map[string]entry {
		t.Helper()
		r := e.do(e.admin, "GET", "/v1/computers/"+id+"/files"+q, nil)
		if r.code != http.StatusOK {
			t.Fatalf("list %s: %s", q, r)
		}
		var l struct {
			Object    string  `json:"object"`
			Data      []entry `json:"data"`
			Truncated bool    `json:"truncated"`
		}
		r.json(t, &l)
		out := map[string]entry{}
		for _, en := range l.Data {
			out[en.Name] = en
		}
		return out
	}
	if l := listing("?dir=dir/sub"); len(l) != 1 || l["a.bin"].Type != "file" || l["a.bin"].Size != 3000 || l["a.bin"].Path != "/workspace/dir/sub/a.bin" {
		t.Fatalf("listing dir/sub: %+v", l)
	}
	if l := listing(""); l["dir"].Type != "dir" {
		t.Fatalf("listing the workspace: %+v", l)
	}
	if l := listing("?dir=dir"); l["sub"].Type != "dir" || l["inside.txt"].Size != 11 {
		t.Fatalf("listing dir: %+v", l)
	}
	e.do(e.admin, "GET", "/v1/computers/"+id+"/files?dir=nope", nil).wantError(t, http.StatusNotFound, "")
	e.do(e.admin, "GET", base+"dir", nil).wantError(t, http.StatusBadRequest, "")
	e.do(e.admin, "GET", base+"missing.txt", nil).wantError(t, http.StatusNotFound, "")

	if r := e.do(e.admin, "DELETE", base+"dir/sub/a.bin", nil); r.code != http.StatusNoContent {
		t.Fatalf("delete: %s", r)
	}
	e.do(e.admin, "GET", base+"dir/sub/a.bin", nil).wantError(t, http.StatusNotFound, "")
	e.do(e.admin, "DELETE", base+"dir/sub/a.bin", nil).wantError(t, http.StatusNotFound, "")
	if r := e.do(e.admin, "DELETE", base+"dir", nil); r.code != http.StatusNoContent {
		t.Fatalf("delete a tree: %s", r)
	}
	if l := listing(""); l["dir"].Name != "" {
		t.Fatalf("dir survived its deletion: %+v", l)
	}

	// Size limit: exactly the limit is fine, one byte more is 413 and the
	// previous content stays.
	if r := e.do(e.admin, "PUT", base+"keep.txt", "original"); r.code != http.StatusCreated {
		t.Fatalf("put keep.txt: %s", r)
	}
	e.do(e.admin, "PUT", base+"keep.txt", bytes.Repeat([]byte("x"), 64<<10+1)).wantError(t, http.StatusRequestEntityTooLarge, "too_large")
	if r := e.do(e.admin, "GET", base+"keep.txt", nil); r.code != 200 || string(r.body) != "original" {
		t.Fatalf("after a refused upload keep.txt is %s", r)
	}
	if out := e.sh(e.admin, id, "ls -A"); strings.Contains(out, "upload") {
		t.Fatalf("a refused upload left a temporary file: %q", out)
	}
	if r := e.do(e.admin, "PUT", base+"exact.bin", bytes.Repeat([]byte("y"), 64<<10)); r.code != http.StatusCreated {
		t.Fatalf("an upload of exactly the limit: %s", r)
	}
	// A file made bigger than the limit inside the computer is refused on
	// GET, before any byte is sent.
	e.sh(e.admin, id, "head -c 70000 /dev/zero > big.bin")
	e.do(e.admin, "GET", base+"big.bin", nil).wantError(t, http.StatusRequestEntityTooLarge, "too_large")
}

// TestFileTraversalRefused: encoded "..", absolute paths and symlinks that
// lead out of /workspace are 4xx, never 5xx and never the file's content.
func TestFileTraversalRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.create(e.admin, nil).ID
	e.sh(e.admin, id, "mkdir d; ln -s /etc/passwd pw; ln -s /proc/1/environ penv; ln -s ../../../../etc/passwd relpw; ln -s /etc etcdir; ln -s /proc/self/root rootlink")
	cbase := "/v1/computers/" + id
	cases := []struct{ method, path string }{
		{"GET", "/files/%2e%2e%2f%2e%2e%2fetc%2fpasswd"},
		{"GET", "/files/..%2f..%2f..%2fetc%2fpasswd"},
		{"GET", "/files/%2e%2e/%2e%2e/%2e%2e/etc/passwd"},
		{"GET", "/files/d/%2e%2e%2f%2e%2e%2f%2e%2e%2fetc%2fpasswd"},
		{"GET", "/files/%2Fetc%2Fpasswd"},
		{"GET", "/files/%2Fworkspace%2F..%2Fetc%2Fpasswd"},
		{"GET", "/files//etc/passwd"},
		{"GET", "/files/pw"},
		{"GET", "/files/penv"},
		{"GET", "/files/relpw"},
		{"GET", "/files/etcdir/passwd"},
		{"GET", "/files/rootlink/etc/passwd"},
		{"GET", "/files?dir=..%2F..%2Fetc"},
		{"GET", "/files?dir=%2Fetc"},
		{"GET", "/files?dir=etcdir"},
		{"GET", "/files?dir=rootlink"},
		{"PUT", "/files/pw"},
		{"PUT", "/files/%2e%2e%2fescaped.txt"},
		{"PUT", "/files/etcdir/escaped.txt"},
		{"DELETE", "/files/%2e%2e%2f%2e%2e%2fetc%2fpasswd"},
		{"DELETE", "/files/etcdir/passwd"},
	}
	for _, c := range cases {
		var body io.Reader
		if c.method == "PUT" {
			body = strings.NewReader("owned")
		}
		r, err := e.rawDo(e.admin, c.method, cbase+c.path, body)
		if err != nil {
			t.Errorf("%s %s: broken response (status %d): %v", c.method, c.path, r.code, err)
			continue
		}
		if r.code < 400 || r.code >= 500 {
			t.Errorf("%s %s: %s, want 4xx", c.method, c.path, r)
		}
		if bytes.Contains(r.body, []byte("root:x:0:0")) || bytes.Contains(r.body, []byte("PATH=")) {
			t.Errorf("%s %s leaked content: %s", c.method, c.path, r)
		}
	}
	// Nothing was written or removed outside the workspace; the links are
	// intact.
	out := e.sh(e.admin, id, "ls / /workspace; head -c 9 /etc/passwd; readlink pw")
	if strings.Contains(out, "escaped.txt") || !strings.Contains(out, "root:x:0:") || !strings.Contains(out, "/etc/passwd") {
		t.Fatalf("after the attempts: %q", out)
	}
}

// TestFileErrorsAre4xx: a client's bad file path (NUL byte, a path through
// a file, a directory as upload target, a symlink or a FIFO to download) is
// a 4xx answer with an error body, never a 500 or a broken 200.
func TestFileErrorsAre4xx(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.create(e.admin, nil).ID
	e.sh(e.admin, id, "printf 'twelve bytes' > inside.txt; ln -s inside.txt goodlink; mkdir d; mkfifo fifo")
	cbase := "/v1/computers/" + id
	cases := []struct{ method, path string }{
		{"GET", "/files/a%00b"},
		{"PUT", "/files/a%00b"},
		{"GET", "/files/inside.txt/x"},
		{"PUT", "/files/inside.txt/x"},
		{"PUT", "/files/d"},
		{"GET", "/files/fifo"},
		{"GET", "/files?dir=inside.txt"},
		{"GET", "/files/"},
		{"PUT", "/files/"},
		{"PUT", "/files/%2Fworkspace"},
		{"DELETE", "/files/%2Fworkspace"},
	}
	for _, c := range cases {
		var body io.Reader
		if c.method == "PUT" {
			body = strings.NewReader("data")
		}
		r, err := e.rawDo(e.admin, c.method, cbase+c.path, body)
		if err != nil {
			t.Errorf("%s %s: broken response (status %d): %v", c.method, c.path, r.code, err)
			continue
		}
		if r.code < 400 || r.code >= 500 || !bytes.Contains(r.body, []byte(`"error"`)) {
			t.Errorf("%s %s: %s, want 4xx with an error body", c.method, c.path, r)
		}
	}
	// A symlink inside the workspace is either refused (4xx) or served as its
	// target, whole; never a 200 whose length is the link's.
	r, err := e.rawDo(e.admin, "GET", cbase+"/files/goodlink", nil)
	switch {
	case err != nil:
		t.Errorf("GET goodlink: broken response (status %d, %d bytes): %v", r.code, len(r.body), err)
	case r.code == 200 && string(r.body) != "twelve bytes":
		t.Errorf("GET goodlink: 200 with %q", r.body)
	case r.code != 200 && (r.code < 400 || r.code >= 500):
		t.Errorf("GET goodlink: %s", r)
	}
}

// TestExecErrorsAre4xx: a program that cannot be started for a reason of
// the request (a NUL byte in argv, a file that is not executable) is a 4xx.
func TestExecErrorsAre4xx(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.create(e.admin, nil).ID
	for _, body := range []map[string]any{
		{"argv": []string{"echo", "a\x00b"}},
		{"argv": []string{"/etc/passwd"}},
		{"argv": []string{""}},
	} {
		r := e.do(e.admin, "POST", "/v1/computers/"+id+"/exec", body)
		if r.code < 400 || r.code >= 500 {
			t.Errorf("exec %q: %s, want 4xx", body["argv"], r)
		}
	}
}

// TestAuth: missing, wrong and revoked keys are 401; a key without the
// computer capability and an org that does not allow computers are 403;
// another org's computer does not exist (404) for every operation.
func TestAuth(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r := e.do("", "POST", "/v1/computers", nil)
	r.wantError(t, http.StatusUnauthorized, "invalid_api_key")
	if !strings.HasPrefix(r.hdr.Get("WWW-Authenticate"), "Bearer") {
		t.Fatalf("401 without WWW-Authenticate: %v", r.hdr)
	}
	e.do("cub_not_a_real_key_at_all_000000", "POST", "/v1/computers", nil).wantError(t, http.StatusUnauthorized, "invalid_api_key")
	e.do("cub_not_a_real_key_at_all_000000", "GET", "/v1/computers", nil).wantError(t, http.StatusUnauthorized, "invalid_api_key")
	e.do("", "GET", "/v1/audit", nil).wantError(t, http.StatusUnauthorized, "")
	e.do("", "GET", "/v1/usage", nil).wantError(t, http.StatusUnauthorized, "")

	// Revoked.
	kid, ksec := e.newKey("", computerCaps)
	c := e.create(ksec, nil)
	if r := e.do(e.admin, "DELETE", "/v1/admin/keys/"+kid, nil); r.code != http.StatusNoContent {
		t.Fatalf("revoke: %s", r)
	}
	e.do(ksec, "GET", "/v1/computers", nil).wantError(t, http.StatusUnauthorized, "invalid_api_key")
	e.do(ksec, "POST", "/v1/computers/"+c.ID+"/exec", map[string]any{"command": "true"}).wantError(t, http.StatusUnauthorized, "invalid_api_key")
	e.do(ksec, "POST", "/v1/computers", nil).wantError(t, http.StatusUnauthorized, "invalid_api_key")

	// No computer capability; an org that does not allow computers.
	_, filesOnly := e.newKey("", `{"files":{}}`)
	e.do(filesOnly, "POST", "/v1/computers", nil).wantError(t, http.StatusForbidden, "forbidden")
	_, toolingOnly := e.newKey("", `{"tooling":{"system_tools":["computer"]}}`)
	e.do(toolingOnly, "POST", "/v1/computers", nil).wantError(t, http.StatusForbidden, "forbidden")
	legacy := e.newOrg("legacy", false)
	_, legacyKey := e.newKey(legacy, computerCaps)
	e.do(legacyKey, "POST", "/v1/computers", nil).wantError(t, http.StatusForbidden, "forbidden")
	// Not an admin.
	e.do(filesOnly, "POST", "/v1/admin/orgs", map[string]any{"name": "x"}).wantError(t, http.StatusForbidden, "forbidden")
	e.do(filesOnly, "GET", "/v1/admin/keys", nil).wantError(t, http.StatusForbidden, "forbidden")

	// Cross-org: org A's computer is invisible to org B.
	a := e.create(e.admin, nil)
	e.sh(e.admin, a.ID, "echo a-secret > a.txt")
	orgB := e.newOrg("b", true)
	_, b := e.newKey(orgB, computerCaps)
	bc := e.create(b, nil) // B can use its own
	cb := "/v1/computers/" + a.ID
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"GET", cb, nil},
		{"DELETE", cb, nil},
		{"POST", cb + "/exec", map[string]any{"command": "cat a.txt"}},
		{"GET", cb + "/files/a.txt", nil},
		{"PUT", cb + "/files/b.txt", "from b"},
		{"DELETE", cb + "/files/a.txt", nil},
		{"GET", cb + "/files", nil},
	} {
		r := e.do(b, c.method, c.path, c.body)
		r.wantError(t, http.StatusNotFound, "not_found")
		if bytes.Contains(r.body, []byte("a-secret")) {
			t.Fatalf("%s %s leaked: %s", c.method, c.path, r)
		}
	}
	r = e.doCtx(context.Background(), b, "POST", cb+"/exec", map[string]any{"command": "true"}, map[string]string{"Accept": "text/event-stream"})
	r.wantError(t, http.StatusNotFound, "not_found")
	var l struct {
		Data []view `json:"data"`
	}
	e.do(b, "GET", "/v1/computers?status=all", nil).json(t, &l)
	if len(l.Data) != 1 || l.Data[0].ID != bc.ID {
		t.Fatalf("org B lists %+v", l.Data)
	}
	for _, ev := range e.audit(b, "") {
		if ev.ComputerID == a.ID || ev.OrgID != orgB {
			t.Fatalf("org B's audit shows %+v", ev)
		}
	}
	// A's computer is untouched.
	if g := e.get(e.admin, a.ID); g.Status != "ready" {
		t.Fatalf("A's computer after B's attempts: %+v", g)
	}
	if out := e.sh(e.admin, a.ID, "ls; cat a.txt"); out != "a.txt\na-secret\n" {
		t.Fatalf("A's workspace after B's attempts: %q", out)
	}
	// And B's computer is invisible to A's non-admin keys too.
	_, a2 := e.newKey("", computerCaps)
	e.do(a2, "GET", "/v1/computers/"+bc.ID, nil).wantError(t, http.StatusNotFound, "not_found")
}

// TestKeyWithoutComputerCapabilityIsForbidden: the computer capability (and
// the org's permission) guard every computer operation, not only creation.
// A key of the same org without it may not read, run in, write to or stop
// another key's computer.
func TestKeyWithoutComputerCapabilityIsForbidden(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	c := e.create(e.admin, nil)
	_, filesOnly := e.newKey("", `{"files":{}}`)
	cb := "/v1/computers/" + c.ID
	for _, op := range []struct {
		method, path string
		body         any
	}{
		{"GET", "/v1/computers", nil},
		{"GET", cb, nil},
		{"POST", cb + "/exec", map[string]any{"command": "touch /workspace/ran"}},
		{"PUT", cb + "/files/written.txt", "x"},
		{"GET", cb + "/files", nil},
		{"DELETE", cb, nil},
	} {
		if r := e.do(filesOnly, op.method, op.path, op.body); r.code != http.StatusForbidden {
			t.Errorf("%s %s with a key without the computer capability: %s, want 403", op.method, op.path, r)
		}
	}
	if g := e.get(e.admin, c.ID); g.Status != "ready" {
		t.Errorf("the computer was stopped by a key without the capability: %+v", g)
	} else if out := e.sh(e.admin, c.ID, "ls"); out != "" {
		t.Errorf("the workspace was changed by a key without the capability: %q", out)
	}
}

// TestClampToKeyLimits: larger requested limits are brought down to the
// key's and the deployment's, never rejected.
func TestClampToKeyLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	_, k := e.newKey("", `{"tooling":{"system_tools":["computer"]},"computer":{"lifetime_seconds":2,"exec_timeout_seconds":1}}`)
	c := e.create(k, map[string]any{"lifetime_seconds": 3600, "exec_timeout_seconds": 600})
	if c.Limits.LifetimeSeconds != 2 || c.Limits.ExecTimeoutSeconds != 1 || c.ExpiresAt != *c.ReadyAt+2 {
		t.Fatalf("key-clamped computer %+v (ready %d)", c, *c.ReadyAt)
	}
	start := time.Now()
	r := e.exec(k, c.ID, map[string]any{"command": "sleep 5", "timeout_seconds": 100})
	if !r.TimedOut || !strings.Contains(r.Stderr, "timed out after 1 seconds") || time.Since(start) > 4*time.Second {
		t.Fatalf("exec under a 1 s key limit: %+v after %v", r, time.Since(start))
	}
	// Without a request the key's limits apply.
	d := e.create(k, nil)
	if d.Limits.LifetimeSeconds != 2 || d.Limits.ExecTimeoutSeconds != 1 {
		t.Fatalf("key limits without a request: %+v", d.Limits)
	}
	// Smaller requests are honoured; the deployment caps the admin key.
	s := e.create(k, map[string]any{"lifetime_seconds": 1})
	if s.Limits.LifetimeSeconds != 1 {
		t.Fatalf("a smaller lifetime: %+v", s.Limits)
	}
	big := e.create(e.admin, map[string]any{"lifetime_seconds": 999999, "exec_timeout_seconds": 99999, "memory_mb": 100000})
	if big.Limits.LifetimeSeconds != 600 || big.Limits.ExecTimeoutSeconds != 30 || big.Limits.MemoryMB != 256 {
		t.Fatalf("deployment clamp: %+v", big.Limits)
	}
	small := e.create(e.admin, map[string]any{"lifetime_seconds": 100, "exec_timeout_seconds": 5, "memory_mb": 128})
	if small.Limits.LifetimeSeconds != 100 || small.Limits.ExecTimeoutSeconds != 5 || small.Limits.MemoryMB != 128 {
		t.Fatalf("smaller requests: %+v", small.Limits)
	}
	// The key-limited computer dies with its lifetime.
	eventually(t, 6*time.Second, "key-limited computer destroyed", func() bool { return e.get(k, c.ID).Status == "destroyed" })
}

// TestClampHugeMemoryRequest: a huge memory_mb is brought down to the
// deployment's memory, not wrapped around into a tiny computer.
func TestClampHugeMemoryRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for _, mb := range []int64{1 << 44, 1<<53 + 1} {
		r := e.do(e.admin, "POST", "/v1/computers", fmt.Sprintf(`{"memory_mb":%d}`, mb))
		if r.code != http.StatusCreated {
			t.Errorf("memory_mb %d: %s", mb, r)
			continue
		}
		var v view
		r.json(t, &v)
		if v.Limits.MemoryMB != 256 {
			t.Errorf("memory_mb %d gave a computer with %d MiB; want the deployment's 256", mb, v.Limits.MemoryMB)
		}
	}
}

// TestLifetimeExpiry: the reaper destroys a computer whose lifetime is over,
// with exactly one usage row.
func TestLifetimeExpiry(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	c := e.create(e.admin, map[string]any{"lifetime_seconds": 1})
	if c.ExpiresAt != *c.ReadyAt+1 {
		t.Fatalf("expires_at %d ready_at %d", c.ExpiresAt, *c.ReadyAt)
	}
	start := time.Now()
	eventually(t, 5*time.Second, "expired computer destroyed", func() bool { return e.get(e.admin, c.ID).Status == "destroyed" })
	t.Logf("destroyed %v after creation", time.Since(start))
	e.do(e.admin, "POST", "/v1/computers/"+c.ID+"/exec", map[string]any{"command": "true"}).wantError(t, http.StatusConflict, "computer_gone")
	e.do(e.admin, "GET", "/v1/computers/"+c.ID+"/files/x", nil).wantError(t, http.StatusConflict, "computer_gone")
	e.do(e.admin, "DELETE", "/v1/computers/"+c.ID, nil).wantError(t, http.StatusConflict, "computer_gone")
	time.Sleep(700 * time.Millisecond) // another reaper tick must not add rows
	rows := usageOf(e.usage(e.admin), c.ID)
	if len(rows) != 1 || rows[0].Kind != "sandbox_seconds" || rows[0].Quantity < 1 || rows[0].Quantity > 4 || rows[0].KeyID != e.adminKeyID() {
		t.Fatalf("usage rows %+v", rows)
	}
	evs := eventsOf(e.audit(e.admin, ""), c.ID, "computer.destroyed")
	if len(evs) != 1 || evs[0].Data["reason"] != "expired" || evs[0].Data["seconds"] != float64(rows[0].Quantity) {
		t.Fatalf("computer.destroyed events %+v", evs)
	}
	if n := e.metric(`cubicle_computers{state="ready"}`); n != 0 {
		t.Fatalf("metrics still count %v ready computers", n)
	}
}

// TestAdmission: beyond max concurrent computers or the memory budget a
// create is refused at once with 429 capacity_exceeded; capacity comes back
// when a computer goes.
func TestAdmission(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *computer.Config) { c.MaxConcurrent = 2; c.PoolSize = 0 })
	a := e.create(e.admin, nil)
	e.create(e.admin, nil)
	before := e.metric("cubicle_admissions_refused_total")
	start := time.Now()
	r := e.do(e.admin, "POST", "/v1/computers", nil)
	took := time.Since(start)
	r.wantError(t, http.StatusTooManyRequests, "capacity_exceeded")
	if took > time.Second {
		t.Fatalf("the refusal took %v", took)
	}
	if after := e.metric("cubicle_admissions_refused_total"); after != before+1 {
		t.Fatalf("admissions_refused %v → %v, want +1", before, after)
	}
	var l struct {
		Data []view `json:"data"`
	}
	e.do(e.admin, "GET", "/v1/computers?status=all", nil).json(t, &l)
	if len(l.Data) != 2 {
		t.Fatalf("a refused create left a record: %+v", l.Data)
	}
	if r := e.do(e.admin, "DELETE", "/v1/computers/"+a.ID, nil); r.code != http.StatusNoContent {
		t.Fatalf("delete: %s", r)
	}
	e.create(e.admin, nil)

	// Memory budget: 300 MiB holds one default (256 MiB) computer and a
	// small one, not two default ones.
	m := newEnv(t, func(c *computer.Config) { c.MemoryBudget = 300 << 20 })
	m.create(m.admin, nil)
	m.do(m.admin, "POST", "/v1/computers", nil).wantError(t, http.StatusTooManyRequests, "capacity_exceeded")
	if s := m.create(m.admin, map[string]any{"memory_mb": 32}); s.Limits.MemoryMB != 32 {
		t.Fatalf("small computer %+v", s.Limits)
	}
}

// countSleeps counts processes named sleep in a computer.
func countSleeps(e *env, id string) string {
	e.t.Helper()
	return strings.TrimSpace(e.sh(e.admin, id, "pgrep -x sleep | wc -l"))
}

// TestClientDisconnectKillsProcess: a client that goes away mid-exec (unary
// or SSE) has its process killed and reaped; the capacity of a deleted
// computer is free again at once.
func TestClientDisconnectKillsProcess(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *computer.Config) { c.MaxConcurrent = 1 })
	id := e.create(e.admin, nil).ID

	// Unary.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "POST", e.url+"/v1/computers/"+id+"/exec", strings.NewReader(`{"command":"sleep 30"}`))
		req.Header.Set("Authorization", "Bearer "+e.admin)
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			res.Body.Close()
		}
		done <- err
	}()
	eventually(t, 5*time.Second, "sleep running", func() bool { return countSleeps(e, id) == "1" })
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the cancelled request succeeded")
	}
	eventually(t, 3*time.Second, "sleep killed after the client left", func() bool { return countSleeps(e, id) == "0" })

	// SSE: cancel after the first event.
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	req, _ := http.NewRequestWithContext(ctx2, "POST", e.url+"/v1/computers/"+id+"/exec", strings.NewReader(`{"command":"echo started; exec sleep 30"}`))
	req.Header.Set("Authorization", "Bearer "+e.admin)
	req.Header.Set("Accept", "text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	evs := readSSE(t, res.Body, func(sseEvent) bool { return false })
	if len(evs) != 1 || evs[0].name != "stdout" {
		t.Fatalf("first SSE event %+v", evs)
	}
	if n := countSleeps(e, id); n != "1" {
		t.Fatalf("%s sleeps while the SSE exec runs", n)
	}
	cancel2()
	res.Body.Close()
	eventually(t, 3*time.Second, "SSE sleep killed after the client left", func() bool { return countSleeps(e, id) == "0" })

	// Capacity: with max_concurrent 1, delete then create at once.
	start := time.Now()
	if r := e.do(e.admin, "DELETE", "/v1/computers/"+id, nil); r.code != http.StatusNoContent {
		t.Fatalf("delete: %s", r)
	}
	e.create(e.admin, nil)
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("delete and create took %v", took)
	}
}

// TestAuditHasNoCommandsOrFileNames: audit and usage name computers and keys,
// with kinds, durations, exit codes and seconds, never commands, output or
// file names — neither over the API nor in the database file.
func TestAuditHasNoCommandsOrFileNames(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	creatorID, creator := e.newKey("", computerCaps)
	stopperID, stopper := e.newKey("", computerCaps)
	c := e.create(creator, nil)
	cb := "/v1/computers/" + c.ID
	if r := e.exec(creator, c.ID, map[string]any{"command": "echo SECRET_CMD_MARKER; exit 3"}); r.ExitCode != 3 || r.Stdout != "SECRET_CMD_MARKER\n" {
		t.Fatalf("exec: %+v", r)
	}
	e.exec(creator, c.ID, map[string]any{"argv": []string{"echo", "SECRET_ARGV_MARKER"}, "env": map[string]string{"SECRET_ENV_MARKER": "SECRET_ENVVAL_MARKER"}, "stdin": "SECRET_STDIN_MARKER"})
	if r := e.do(creator, "PUT", cb+"/files/SECRET_DIR_MARKER/SECRET_FILE_MARKER.txt", "SECRET_CONTENT_MARKER"); r.code != http.StatusCreated {
		t.Fatalf("put: %s", r)
	}
	if r := e.do(creator, "GET", cb+"/files/SECRET_DIR_MARKER/SECRET_FILE_MARKER.txt", nil); r.code != 200 {
		t.Fatalf("get: %s", r)
	}
	e.do(creator, "GET", cb+"/files?dir=SECRET_DIR_MARKER", nil)
	e.do(creator, "GET", cb+"/files/SECRET_MISSING_MARKER.txt", nil)
	e.do(creator, "DELETE", cb+"/files/SECRET_DIR_MARKER/SECRET_FILE_MARKER.txt", nil)
	time.Sleep(1100 * time.Millisecond) // so that the computer runs more than a second
	if r := e.do(stopper, "DELETE", cb, nil); r.code != http.StatusNoContent {
		t.Fatalf("delete by another key: %s", r)
	}

	auditBody := e.do(e.admin, "GET", "/v1/audit", nil).body
	usageBody := e.do(e.admin, "GET", "/v1/usage", nil).body
	if bytes.Contains(auditBody, []byte("MARKER")) || bytes.Contains(usageBody, []byte("MARKER")) {
		t.Fatalf("a marker reached audit or usage:\naudit: %s\nusage: %s", auditBody, usageBody)
	}
	for _, name := range []string{"cubicle.db", "cubicle.db-wal", "cubicle.db-shm"} {
		b, err := os.ReadFile(filepath.Join(e.dir, name))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("MARKER")) {
			t.Fatalf("a marker is stored in %s", name)
		}
	}

	evs := eventsOf(e.audit(e.admin, ""), c.ID, "")
	byType := map[string][]event{}
	for _, ev := range evs {
		byType[ev.Type] = append(byType[ev.Type], ev)
	}
	one := func(typ, key string) event {
		t.Helper()
		l := byType[typ]
		if len(l) != 1 || l[0].KeyID != key || l[0].ComputerID != c.ID {
			t.Fatalf("%s events %+v, want one by %s", typ, l, key)
		}
		return l[0]
	}
	one("computer.created", creatorID)
	one("computer.destroy_requested", stopperID)
	destroyed := one("computer.destroyed", creatorID)
	secs, ok := destroyed.Data["seconds"].(float64)
	if !ok || secs < 2 || secs > 5 {
		t.Fatalf("computer.destroyed seconds %v", destroyed.Data)
	}
	ex := byType["computer.executed"]
	if len(ex) != 2 {
		t.Fatalf("computer.executed events %+v, want 2", ex)
	}
	for i, want := range []float64{3, 0} {
		d := ex[i].Data
		if ex[i].KeyID != creatorID || d["kind"] != "exec" || d["exit_code"] != want {
			t.Fatalf("computer.executed %d: %+v", i, ex[i])
		}
		if _, ok := d["duration_ms"].(float64); !ok {
			t.Fatalf("computer.executed %d lacks duration_ms: %+v", i, d)
		}
	}
	// Filters.
	if l := eventsOf(e.audit(e.admin, "?type=computer.executed"), c.ID, ""); len(l) != 2 {
		t.Fatalf("?type=computer.executed: %+v", l)
	}
	if l := e.audit(e.admin, fmt.Sprintf("?since=%d", time.Now().Add(time.Hour).Unix())); len(l) != 0 {
		t.Fatalf("?since=future: %+v", l)
	}
	e.do(e.admin, "GET", "/v1/audit?since=yesterday", nil).wantError(t, http.StatusBadRequest, "invalid_request")

	// Usage: one row, charged to the creator although another key stopped it.
	rows := usageOf(e.usage(creator), c.ID)
	if len(rows) != 1 || rows[0].KeyID != creatorID || rows[0].Kind != "sandbox_seconds" || float64(rows[0].Quantity) != secs {
		t.Fatalf("usage %+v, want one sandbox_seconds row of %v s for %s", rows, secs, creatorID)
	}
}

// TestHealthReadyMetrics: /healthz always, /readyz only after SetReady,
// /metrics in the Prometheus text format.
func TestHealthReadyMetrics(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, notReady)
	if r := e.do("", "GET", "/healthz", nil); r.code != 200 {
		t.Fatalf("healthz: %s", r)
	}
	if r := e.do("", "GET", "/readyz", nil); r.code != http.StatusServiceUnavailable {
		t.Fatalf("readyz before the probe: %s", r)
	}
	e.api.SetReady(true)
	if r := e.do("", "GET", "/readyz", nil); r.code != 200 {
		t.Fatalf("readyz after the probe: %s", r)
	}
	c := e.create(e.admin, nil)
	e.sh(e.admin, c.ID, "true")
	e.sh(e.admin, c.ID, "sleep 0.3")
	r := e.do("", "GET", "/metrics", nil)
	if r.code != 200 || !strings.HasPrefix(r.hdr.Get("Content-Type"), "text/plain") {
		t.Fatalf("metrics: %d %q", r.code, r.hdr.Get("Content-Type"))
	}
	text := string(r.body)
	for _, want := range []string{
		"# TYPE cubicle_computers gauge", `cubicle_computers{state="ready"} 1`,
		"# TYPE cubicle_pool_depth gauge", "cubicle_pool_depth 0",
		"# TYPE cubicle_admissions_refused_total counter", "cubicle_admissions_refused_total 0",
		"# TYPE cubicle_exec_duration_seconds histogram",
		`cubicle_exec_duration_seconds_bucket{le="0.001"} `, `cubicle_exec_duration_seconds_bucket{le="+Inf"} 2`,
		"cubicle_exec_duration_seconds_sum ", "cubicle_exec_duration_seconds_count 2",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if sum := e.metric("cubicle_exec_duration_seconds_sum"); sum < 0.3 || sum > 10 {
		t.Errorf("exec duration sum %v", sum)
	}
	// Buckets are cumulative.
	prev := -1.0
	for _, le := range append(computerBuckets(), "+Inf") {
		v := e.metric(`cubicle_exec_duration_seconds_bucket{le="` + le + `"}`)
		if v < prev {
			t.Fatalf("bucket le=%s is %v after %v", le, v, prev)
		}
		prev = v
	}
	if e.metric(`cubicle_exec_duration_seconds_bucket{le="0.25"}`) != 1 {
		t.Errorf("exactly one exec took under 0.25 s:\n%s", text)
	}
	// Unauthenticated health endpoints, unknown routes answer JSON 404.
	e.do("", "GET", "/nope", nil).wantError(t, http.StatusNotFound, "not_found")
}

func computerBuckets() []string {
	var out []string
	for _, b := range computer.DurationBuckets {
		out = append(out, strings.TrimSuffix(fmt.Sprintf("%g", b), ".0"))
	}
	return out
}

// poolIDs lists the computers the driver runs (their directories).
func poolIDs(t *testing.T, e *env) map[string]bool {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(e.dir, "computers"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, en := range ents {
		out[en.Name()] = true
	}
	return out
}

// TestWarmPool: a create is served from a full pool, the pool refills, and
// no computer is ever handed out twice.
func TestWarmPool(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *computer.Config) { c.PoolSize = 2; c.MaxConcurrent = 8 })
	eventually(t, 15*time.Second, "pool filled", func() bool { return e.metric("cubicle_pool_depth") == 2 })
	waiting := poolIDs(t, e)
	if len(waiting) != 2 {
		t.Fatalf("driver runs %d computers with a full pool of 2", len(waiting))
	}
	start := time.Now()
	first := e.create(e.admin, nil)
	took := time.Since(start)
	if !waiting[first.ID] {
		t.Fatalf("create made %s instead of taking one of the waiting %v", first.ID, waiting)
	}
	if *first.ReadyAt != first.CreatedAt {
		t.Fatalf("pooled computer: created_at %d ready_at %d", first.CreatedAt, *first.ReadyAt)
	}
	t.Logf("create from the pool took %v", took)
	if out := e.sh(e.admin, first.ID, "echo pooled"); out != "pooled\n" {
		t.Fatalf("pooled computer exec: %q", out)
	}
	eventually(t, 10*time.Second, "pool refilled", func() bool { return e.metric("cubicle_pool_depth") == 2 })

	seen := map[string]bool{first.ID: true}
	if r := e.do(e.admin, "DELETE", "/v1/computers/"+first.ID, nil); r.code != http.StatusNoContent {
		t.Fatalf("delete: %s", r)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	ids := make([]string, 4)
	codes := make([]resp, 4)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := e.rawDo(e.admin, "POST", "/v1/computers", nil)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("create: %v", err)
				return
			}
			codes[i] = r
			var v view
			json.Unmarshal(r.body, &v)
			ids[i] = v.ID
		}()
	}
	wg.Wait()
	for i, id := range ids {
		if codes[i].code != http.StatusCreated || id == "" {
			t.Fatalf("concurrent create %d: %s", i, codes[i])
		}
		if seen[id] {
			t.Fatalf("computer %s handed out twice (ids %v, first %s)", id, ids, first.ID)
		}
		seen[id] = true
	}
	// Another memory limit is served from the pool too (issue 15 goal 2:
	// the claimed computer takes it on its live cgroup), never twice.
	eventually(t, 10*time.Second, "pool refilled", func() bool { return e.metric("cubicle_pool_depth") == 2 })
	waiting = poolIDs(t, e)
	other := e.create(e.admin, map[string]any{"memory_mb": 64})
	if !waiting[other.ID] || seen[other.ID] || other.Limits.MemoryMB != 64 {
		t.Fatalf("a 64 MiB create made %s (%d MiB); want one of the waiting %v, not handed out before", other.ID, other.Limits.MemoryMB, waiting)
	}
}

// TestDecodeStrict: unknown fields, wrong types and trailing data are 400
// naming the field.
func TestDecodeStrict(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	c := e.create(e.admin, nil)
	param := func(r resp, want string) {
		t.Helper()
		er := r.wantError(t, http.StatusBadRequest, "invalid_request")
		if want == "" {
			return
		}
		if er.Error.Param == nil || *er.Error.Param != want {
			t.Fatalf("param %v, want %q: %s", er.Error.Param, want, r)
		}
	}
	param(e.do(e.admin, "POST", "/v1/computers", `{"memory_mb":64,"bogus":1}`), "bogus")
	if r := e.do(e.admin, "POST", "/v1/computers", `{"bogus":1}`); !strings.Contains(string(r.body), `unknown field \"bogus\"`) {
		t.Fatalf("the message does not name the unknown field: %s", r)
	}
	param(e.do(e.admin, "POST", "/v1/computers", `{"lifetime_seconds":"long"}`), "lifetime_seconds")
	param(e.do(e.admin, "POST", "/v1/computers", `{"metadata":{"a":1}}`), "metadata.a")
	param(e.do(e.admin, "POST", "/v1/computers", `{} {}`), "")
	param(e.do(e.admin, "POST", "/v1/computers", `{"lifetime_seconds":`), "")
	param(e.do(e.admin, "POST", "/v1/computers", `[]`), "")
	param(e.do(e.admin, "POST", "/v1/computers", `{"lifetime_seconds":-1}`), "")
	param(e.do(e.admin, "POST", "/v1/computers/"+c.ID+"/exec", `{"command":"true","shell":"bash"}`), "shell")
	param(e.do(e.admin, "POST", "/v1/computers/"+c.ID+"/exec", `{"command":["true"]}`), "command")
	param(e.do(e.admin, "POST", "/v1/computers/"+c.ID+"/exec", ``), "")
	param(e.do(e.admin, "POST", "/v1/admin/orgs", `{"name":"x","allow_computers":true}`), "allow_computers")
	param(e.do(e.admin, "POST", "/v1/admin/keys", `{"name":"x","capabilities":{"computer":{}}}`), "capabilities")
	param(e.do(e.admin, "POST", "/v1/admin/keys", `{"name":"x","capabilities":{"shell":{}}}`), "capabilities")
	meta := map[string]string{}
	for i := 0; i < 17; i++ {
		meta[fmt.Sprint("k", i)] = "v"
	}
	param(e.do(e.admin, "POST", "/v1/computers", map[string]any{"metadata": meta}), "")
	var l struct {
		Data []view `json:"data"`
	}
	e.do(e.admin, "GET", "/v1/computers?status=all", nil).json(t, &l)
	if len(l.Data) != 1 {
		t.Fatalf("refused requests created computers: %+v", l.Data)
	}
}
