package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// procView is the process object of the API.
type procView struct {
	ID          string   `json:"id"`
	Object      string   `json:"object"`
	Pid         int      `json:"pid"`
	Command     string   `json:"command"`
	Argv        []string `json:"argv"`
	Status      string   `json:"status"`
	ExitCode    *int     `json:"exit_code"`
	Signal      int      `json:"signal"`
	StartedAt   int64    `json:"started_at"`
	EndedAt     *int64   `json:"ended_at"`
	StdinOpen   bool     `json:"stdin_open"`
	OutputStart int64    `json:"output_start"`
	OutputEnd   int64    `json:"output_end"`
}

type procOutput struct {
	Object     string   `json:"object"`
	Offset     int64    `json:"offset"`
	Dropped    int64    `json:"dropped"`
	NextOffset int64    `json:"next_offset"`
	Stdout     string   `json:"stdout"`
	Stderr     string   `json:"stderr"`
	Process    procView `json:"process"`
}

// startProc starts a background process and fails unless it answers 201.
func (e *env) startProc(key, id string, body any) procView {
	e.t.Helper()
	r := e.do(key, "POST", "/v1/computers/"+id+"/processes", body)
	if r.code != http.StatusCreated {
		e.t.Fatalf("start process %v: %s", body, r)
	}
	var v procView
	r.json(e.t, &v)
	return v
}

// procOut reads a process's output (query: "offset=…").
func (e *env) procOut(key, id, pid, query string) procOutput {
	e.t.Helper()
	r := e.do(key, "GET", "/v1/computers/"+id+"/processes/"+pid+"/output?"+query, nil)
	if r.code != http.StatusOK {
		e.t.Fatalf("output of %s: %s", pid, r)
	}
	var o procOutput
	r.json(e.t, &o)
	return o
}

func (e *env) procGet(key, id, pid string) procView {
	e.t.Helper()
	r := e.do(key, "GET", "/v1/computers/"+id+"/processes/"+pid, nil)
	if r.code != http.StatusOK {
		e.t.Fatalf("get %s: %s", pid, r)
	}
	var v procView
	r.json(e.t, &v)
	return v
}

// followSSE opens an output stream (GET with Accept: text/event-stream) as
// the admin and fails unless it answers 200.
func (e *env) followSSE(ctx context.Context, path string) *http.Response {
	e.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+e.admin)
	req.Header.Set("Accept", "text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		res.Body.Close()
		e.t.Fatalf("GET %s as SSE: %d", path, res.StatusCode)
	}
	return res
}

// A background HTTP server started by one request keeps serving after it
// ended; a later request reads its log from offset 0, an SSE stream
// re-attaches from an offset and follows it, and DELETE kills it.
func TestProcessHTTPServer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.create(e.admin, nil).ID
	p := e.startProc(e.admin, id, map[string]any{"argv": []string{"/usr/bin/python3", "-u", "-m", "http.server", "8000"}})
	if p.Status != "running" || p.Object != "process" || p.Pid <= 1 || p.ExitCode != nil || !strings.HasPrefix(p.ID, "proc_") {
		t.Fatalf("started: %+v", p)
	}
	// Another request reaches it.
	fetch := `/usr/bin/python3 -c 'import time, urllib.request
for i in range(100):
    try:
        print(urllib.request.urlopen("http://127.0.0.1:8000/").status); break
    except OSError: time.sleep(0.1)'`
	if out := e.sh(e.admin, id, fetch); out != "200\n" {
		t.Fatalf("fetch: %q", out)
	}
	// Its log, from offset 0, in a later request.
	var o procOutput
	eventually(t, 10*time.Second, "the server's log of the request", func() bool {
		o = e.procOut(e.admin, id, p.ID, "offset=0")
		return strings.Contains(o.Stderr, `"GET / HTTP/1.1" 200`)
	})
	if !strings.Contains(o.Stdout, "Serving HTTP on") || o.Offset != 0 || o.Dropped != 0 || o.Process.Status != "running" ||
		o.NextOffset != int64(len(o.Stdout)+len(o.Stderr)) {
		t.Fatalf("output: %+v", o)
	}
	// Re-attached over SSE from the middle: what comes is the rest, and
	// a new request shows up as it happens.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	from := int64(len(o.Stdout))
	res := e.followSSE(ctx, fmt.Sprintf("/v1/computers/%s/processes/%s/output?offset=%d", id, p.ID, from))
	defer res.Body.Close()
	fetched := make(chan string, 1)
	go func() {
		r := e.doCtx(ctx, e.admin, "POST", "/v1/computers/"+id+"/exec", map[string]any{"command": strings.Replace(fetch, `/"`, `/?again"`, 1)}, nil)
		fetched <- r.String()
	}()
	var got strings.Builder
	readSSE(t, res.Body, func(ev sseEvent) bool {
		if ev.name != "stderr" {
			t.Errorf("event %s %s", ev.name, ev.data)
			return false
		}
		var d struct{ Data string }
		json.Unmarshal([]byte(ev.data), &d)
		got.WriteString(d.Data)
		return !strings.Contains(got.String(), "GET /?again")
	})
	if !strings.HasPrefix(got.String(), o.Stderr) || strings.Contains(got.String(), "Serving HTTP") {
		t.Fatalf("re-attached from %d: %q", from, got.String())
	}
	if r := <-fetched; !strings.Contains(r, `"stdout":"200\n"`) {
		t.Fatalf("second fetch: %s", r)
	}
	cancel()

	// Killed: its tree is gone, its record and output stay.
	r := e.do(e.admin, "DELETE", "/v1/computers/"+id+"/processes/"+p.ID, nil)
	var k procView
	r.json(t, &k)
	if r.code != 200 || k.Status != "exited" || k.Signal != 9 || k.ExitCode == nil || *k.ExitCode != -1 || k.EndedAt == nil {
		t.Fatalf("kill: %s", r)
	}
	if out := e.exec(e.admin, id, map[string]any{"command": "exec 3<>/dev/tcp/127.0.0.1/8000 && echo open"}); out.Stdout != "" {
		t.Fatalf("the server still answers: %+v", out)
	}
	if o := e.procOut(e.admin, id, p.ID, "offset=0"); !strings.Contains(o.Stderr, "GET /?again") || o.Process.Status != "exited" {
		t.Fatalf("output after the kill: %+v", o)
	}
}

// exec with background: true answers the process at once; stdin written
// to a cat comes back in its output; a signal ends it and is reported;
// the SSE stream of an exited process ends with exit.
func TestProcessStdinAndSignal(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.create(e.admin, nil).ID
	start := time.Now()
	r := e.do(e.admin, "POST", "/v1/computers/"+id+"/exec", map[string]any{"command": "cat; sleep 100", "background": true, "stdin": "one\n"})
	var p procView
	r.json(t, &p)
	if r.code != http.StatusCreated || p.Status != "running" || !p.StdinOpen || time.Since(start) > 10*time.Second {
		t.Fatalf("exec background: %s", r)
	}
	stdin := "/v1/computers/" + id + "/processes/" + p.ID + "/stdin"
	r = e.do(e.admin, "POST", stdin, map[string]any{"data": "dHdvCg==", "encoding": "base64"})
	if r.code != 200 || string(bytes.TrimSpace(r.body)) != `{"written":4,"closed":false}` {
		t.Fatalf("stdin: %s", r)
	}
	eventually(t, 10*time.Second, "cat's output", func() bool { return e.procOut(e.admin, id, p.ID, "").Stdout == "one\ntwo\n" })
	r = e.do(e.admin, "POST", stdin, map[string]any{"close": true})
	if r.code != 200 || string(bytes.TrimSpace(r.body)) != `{"written":0,"closed":true}` {
		t.Fatalf("close stdin: %s", r)
	}
	e.do(e.admin, "POST", stdin, map[string]any{"data": "x"}).wantError(t, http.StatusConflict, "stdin_closed")

	sig := "/v1/computers/" + id + "/processes/" + p.ID + "/signal"
	if e := e.do(e.admin, "POST", sig, map[string]any{"signal": "SIGSEGV"}).wantError(t, 400, ""); e.Error.Param == nil || *e.Error.Param != "signal" {
		t.Fatalf("bad signal: %+v", e)
	}
	r = e.do(e.admin, "POST", sig, map[string]any{"signal": "SIGTERM"})
	var s procView
	r.json(t, &s)
	if r.code != 200 || s.Status != "exited" || s.Signal != 15 || *s.ExitCode != -1 {
		t.Fatalf("SIGTERM: %s", r)
	}
	// SSE from 0 of an exited process: its output, then exit.
	res := e.followSSE(context.Background(), "/v1/computers/"+id+"/processes/"+p.ID+"/output")
	defer res.Body.Close()
	var names []string
	for _, ev := range readSSE(t, res.Body, nil) {
		names = append(names, ev.name+" "+ev.data)
	}
	if len(names) != 2 || names[0] != `stdout {"data":"one\ntwo\n"}` || !strings.HasPrefix(names[1], `exit {"id":"`+p.ID) {
		t.Fatalf("events %q", names)
	}
	// Exec's checks apply; close_stdin is for background processes only.
	if e := e.do(e.admin, "POST", "/v1/computers/"+id+"/exec", map[string]any{"command": "true", "close_stdin": true}).wantError(t, 400, ""); *e.Error.Param != "close_stdin" {
		t.Fatalf("close_stdin on exec: %+v", e)
	}
	if e := e.do(e.admin, "POST", "/v1/computers/"+id+"/processes", map[string]any{"argv": []string{"a\x00"}}).wantError(t, 400, ""); *e.Error.Param != "argv[0]" {
		t.Fatalf("NUL in argv: %+v", e)
	}
}

// The output ring keeps the newest 1 MiB: a read from 0 says how many
// bytes were dropped and where what it got starts.
func TestProcessOutputDropped(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.create(e.admin, nil).ID
	p := e.startProc(e.admin, id, map[string]any{"command": "head -c 1500000 /dev/zero | tr '\\0' x; printf END"})
	eventually(t, 20*time.Second, "exit", func() bool { return e.procGet(e.admin, id, p.ID).Status == "exited" })
	o := e.procOut(e.admin, id, p.ID, "offset=0")
	const total, ring = 1500003, 1 << 20
	if o.Dropped != total-ring || o.Offset != total-ring || o.NextOffset != total || len(o.Stdout) != ring ||
		!strings.HasSuffix(o.Stdout, "xEND") || o.Process.OutputStart != total-ring {
		t.Fatalf("offset %d dropped %d next %d, %d bytes", o.Offset, o.Dropped, o.NextOffset, len(o.Stdout))
	}
	o = e.procOut(e.admin, id, p.ID, fmt.Sprintf("offset=%d&limit=2", total-3))
	if o.Stdout != "EN" || o.Dropped != 0 || o.NextOffset != total-1 {
		t.Fatalf("from total-3, 2 bytes: %+v", o)
	}
	if e := e.do(e.admin, "GET", fmt.Sprintf("/v1/computers/%s/processes/%s/output?offset=%d", id, p.ID, total+1), nil).wantError(t, 400, ""); *e.Error.Param != "offset" {
		t.Fatalf("offset past the end: %+v", e)
	}
}

// At most 32 background processes run in a computer (429); the list pages
// with limit and after; an unknown process is 404.
func TestProcessLimitAndList(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.create(e.admin, nil).ID
	var ids []string
	for i := 0; i < 32; i++ {
		ids = append(ids, e.startProc(e.admin, id, map[string]any{"argv": []string{"sleep", "1000"}}).ID)
	}
	r := e.do(e.admin, "POST", "/v1/computers/"+id+"/processes", map[string]any{"argv": []string{"true"}})
	if e := r.wantError(t, http.StatusTooManyRequests, "too_many_processes"); !strings.Contains(e.Error.Message, "32") {
		t.Fatalf("limit: %s", r)
	}
	var page struct {
		Data    []procView `json:"data"`
		HasMore bool       `json:"has_more"`
		LastID  string     `json:"last_id"`
	}
	e.do(e.admin, "GET", "/v1/computers/"+id+"/processes?order=asc&limit=20", nil).json(t, &page)
	if len(page.Data) != 20 || !page.HasMore || page.Data[0].ID != ids[0] || page.LastID != ids[19] {
		t.Fatalf("first page: %d, more %v, last %s", len(page.Data), page.HasMore, page.LastID)
	}
	e.do(e.admin, "GET", "/v1/computers/"+id+"/processes?order=asc&limit=20&after="+page.LastID, nil).json(t, &page)
	if len(page.Data) != 12 || page.HasMore || page.Data[0].ID != ids[20] || page.Data[11].Status != "running" {
		t.Fatalf("second page: %+v", page)
	}
	e.do(e.admin, "GET", "/v1/computers/"+id+"/processes/proc_999", nil).wantError(t, 404, "not_found")
	// One killed makes room.
	if r := e.do(e.admin, "DELETE", "/v1/computers/"+id+"/processes/"+ids[5], nil); r.code != 200 {
		t.Fatalf("kill: %s", r)
	}
	e.startProc(e.admin, id, map[string]any{"argv": []string{"true"}})
}

// hostProcs lists the host's processes whose command line is cmdline.
func hostProcs(cmdline string) []string {
	var found []string
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range dirs {
		if b, err := os.ReadFile(f); err == nil && string(b) == cmdline {
			found = append(found, f)
		}
	}
	return found
}

// A background process dies with its computer: nothing of it is left on
// the host once the computer is deleted.
func TestProcessDiesWithComputer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.create(e.admin, nil).ID
	arg := fmt.Sprintf("%d.%d", 500000+rand.IntN(400000), rand.IntN(1000000))
	e.startProc(e.admin, id, map[string]any{"command": "sleep " + arg + " & exec sleep " + arg})
	cmdline := "sleep\x00" + arg + "\x00"
	eventually(t, 10*time.Second, "both sleeps on the host", func() bool { return len(hostProcs(cmdline)) == 2 })
	if r := e.do(e.admin, "DELETE", "/v1/computers/"+id, nil); r.code != http.StatusNoContent {
		t.Fatalf("delete: %s", r)
	}
	eventually(t, 5*time.Second, "no sleep left", func() bool { return len(hostProcs(cmdline)) == 0 })
}

// Another organisation's computer has no processes to see or touch (404).
func TestProcessCrossTenant(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.create(e.admin, nil).ID
	p := e.startProc(e.admin, id, map[string]any{"argv": []string{"sleep", "1000"}})
	_, b := e.newKey(e.newOrg("b", true), computerCaps)
	base := "/v1/computers/" + id + "/processes"
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"POST", base, map[string]any{"argv": []string{"true"}}},
		{"POST", "/v1/computers/" + id + "/exec", map[string]any{"argv": []string{"true"}, "background": true}},
		{"GET", base, nil},
		{"GET", base + "/" + p.ID, nil},
		{"GET", base + "/" + p.ID + "/output", nil},
		{"POST", base + "/" + p.ID + "/stdin", map[string]any{"data": "x"}},
		{"POST", base + "/" + p.ID + "/signal", map[string]any{"signal": "SIGKILL"}},
		{"DELETE", base + "/" + p.ID, nil},
	} {
		if r := e.do(b, c.method, c.path, c.body); r.code != http.StatusNotFound {
			t.Errorf("%s %s as another org: %s", c.method, c.path, r)
		}
	}
	if v := e.procGet(e.admin, id, p.ID); v.Status != "running" {
		t.Fatalf("after the other org's calls: %+v", v)
	}
}
