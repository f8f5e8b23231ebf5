package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/config"
)

// pyOutput, pyCell and pyResult mirror the python answer's JSON (written
// out here rather than borrowed from the server, so a change of the wire
// shape fails these tests).
type pyOutput struct {
	Type           string          `json:"type"`
	Name           string          `json:"name"`
	Text           string          `json:"text"`
	MIME           string          `json:"mime"`
	JSON           json.RawMessage `json:"json"`
	PNG            []byte          `json:"png"` // base64 in the JSON
	Width          int             `json:"width"`
	Height         int             `json:"height"`
	ExecutionCount int             `json:"execution_count"`
	EName          string          `json:"ename"`
	EValue         string          `json:"evalue"`
	Traceback      []string        `json:"traceback"`
}

type pyCell struct {
	Index          int        `json:"index"`
	Title          string     `json:"title"`
	Status         string     `json:"status"`
	ExecutionCount int        `json:"execution_count"`
	InputRequested bool       `json:"input_requested"`
	Truncated      bool       `json:"truncated"`
	Outputs        []pyOutput `json:"outputs"`
}

type pyResult struct {
	Status          string   `json:"status"`
	Cells           []pyCell `json:"cells"`
	FailedCell      *int     `json:"failed_cell"`
	Cancelled       bool     `json:"cancelled"`
	TimedOut        bool     `json:"timed_out"`
	Message         string   `json:"message"`
	KernelRestarted bool     `json:"kernel_restarted"`
	DurationMS      int64    `json:"duration_ms"`
}

// stdout concatenates a cell's stdout stream outputs.
func (c pyCell) stdout() string {
	var b strings.Builder
	for _, o := range c.Outputs {
		if o.Type == "stream" && o.Name == "stdout" {
			b.WriteString(o.Text)
		}
	}
	return b.String()
}

// ofType returns the cell's outputs of one type.
func (c pyCell) ofType(typ string) []pyOutput {
	var out []pyOutput
	for _, o := range c.Outputs {
		if o.Type == typ {
			out = append(out, o)
		}
	}
	return out
}

// pySub is e for a subtest: the helpers fail t, not the parent test.
func (e *env) pySub(t *testing.T) *env {
	c := *e
	c.t = t
	return &c
}

// pyCode is a call of cells without titles.
func pyCode(cells ...string) map[string]any {
	l := make([]map[string]any, len(cells))
	for i, c := range cells {
		l[i] = map[string]any{"code": c}
	}
	return map[string]any{"cells": l}
}

func pyPath(id string) string { return "/v1/computers/" + id + "/python" }

// pythonRaw runs a unary python call and fails unless it answers 200.
func (e *env) pythonRaw(key, id string, body any) (pyResult, resp) {
	e.t.Helper()
	r := e.do(key, "POST", pyPath(id), body)
	if r.code != http.StatusOK {
		e.t.Fatalf("python %v: %s", body, r)
	}
	var res pyResult
	r.json(e.t, &res)
	return res, r
}

func (e *env) python(key, id string, body any) pyResult {
	e.t.Helper()
	res, _ := e.pythonRaw(key, id, body)
	return res
}

// pyValue runs one expression that must succeed and returns the text of its
// execute_result.
func (e *env) pyValue(id, expr string) string {
	e.t.Helper()
	res := e.python(e.admin, id, pyCode(expr))
	if res.Status != "ok" || len(res.Cells) != 1 {
		e.t.Fatalf("%q: %+v", expr, res)
	}
	rs := res.Cells[0].ofType("execute_result")
	if len(rs) != 1 {
		e.t.Fatalf("%q: want one execute_result, got %+v", expr, res.Cells[0].Outputs)
	}
	return rs[0].Text
}

// pyNameError runs expr and expects it to fail with NameError.
func (e *env) pyNameError(id, expr string) {
	e.t.Helper()
	res := e.python(e.admin, id, pyCode(expr))
	errs := res.Cells[0].ofType("error")
	if res.Status != "error" || len(errs) != 1 || errs[0].EName != "NameError" {
		e.t.Fatalf("%q should be a NameError: %+v", expr, res)
	}
}

// pyFileExists reports whether path exists in the computer.
func (e *env) pyFileExists(id, path string) bool {
	e.t.Helper()
	return e.exec(e.admin, id, map[string]any{"argv": []string{"test", "-e", path}}).ExitCode == 0
}

// pyAsync is the answer, or the transport error, of a background call.
type pyAsync struct {
	r   resp
	err error
}

// pyStart runs a unary call in the background; its pyAsync arrives on the
// channel.
func (e *env) pyStart(ctx context.Context, id string, body any) <-chan pyAsync {
	b, err := json.Marshal(body)
	if err != nil {
		e.t.Fatal(err)
	}
	ch := make(chan pyAsync, 1)
	go func() {
		req, err := http.NewRequestWithContext(ctx, "POST", e.url+pyPath(id), bytes.NewReader(b))
		if err != nil {
			ch <- pyAsync{err: err}
			return
		}
		req.Header.Set("Authorization", "Bearer "+e.admin)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			ch <- pyAsync{err: err}
			return
		}
		defer res.Body.Close()
		rb, err := io.ReadAll(res.Body)
		ch <- pyAsync{r: resp{code: res.StatusCode, body: rb, hdr: res.Header}, err: err}
	}()
	return ch
}

// pyWait waits for a background call's answer.
func pyWait(t *testing.T, ch <-chan pyAsync, within time.Duration, what string) pyAsync {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(within):
		t.Fatalf("%s: no answer within %v", what, within)
	}
	return pyAsync{}
}

// pythonSSE starts a streamed call; the caller reads and closes the body.
func (e *env) pythonSSE(ctx context.Context, key, id string, body any) *http.Response {
	e.t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		e.t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, "POST", e.url+pyPath(id), bytes.NewReader(b))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Accept", "text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("python SSE: %v", err)
	}
	return res
}

// TestPython runs one computer's session kernel through the HTTP API:
// state, outputs, streaming, timeouts, interrupt and restart, disconnects,
// validation, per_call isolation, audit and serialization of concurrent
// calls. The subtests share the computer and run in order.
func TestPython(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.create(e.admin, nil).ID

	t.Run("UnaryState", func(t *testing.T) {
		e := e.pySub(t)
		first := e.python(e.admin, id, map[string]any{"cells": []map[string]any{{"code": "a = 40", "title": "setup"}}})
		if first.Status != "ok" || len(first.Cells) != 1 || first.Cells[0].Status != "ok" || first.Cells[0].Title != "setup" ||
			first.FailedCell != nil || first.Cancelled || first.TimedOut || first.Cells[0].ExecutionCount < 1 {
			t.Fatalf("first call: %+v", first)
		}
		res := e.python(e.admin, id, map[string]any{"cells": []map[string]any{
			{"code": "a += 2", "title": "add"},
			{"code": "1/0", "title": "boom"},
			{"code": "a = -1", "title": "never"},
		}})
		if res.Status != "error" || res.FailedCell == nil || *res.FailedCell != 1 || res.Cancelled || res.TimedOut || len(res.Cells) != 3 {
			t.Fatalf("cell 2 of 3 fails: %+v", res)
		}
		for i, want := range []struct{ title, status string }{{"add", "ok"}, {"boom", "error"}, {"never", "skipped"}} {
			if c := res.Cells[i]; c.Index != i || c.Title != want.title || c.Status != want.status {
				t.Fatalf("cell %d: %+v, want title %q status %q", i, c, want.title, want.status)
			}
		}
		if len(res.Cells[2].Outputs) != 0 || res.Cells[2].ExecutionCount != 0 {
			t.Fatalf("the skipped cell ran: %+v", res.Cells[2])
		}
		if !strings.Contains(res.Message, "Cell 2 (boom)") || !strings.Contains(res.Message, "ZeroDivisionError") {
			t.Fatalf("message %q does not name the failing cell and its error", res.Message)
		}
		if ec0, ec1 := res.Cells[0].ExecutionCount, res.Cells[1].ExecutionCount; ec0 <= first.Cells[0].ExecutionCount || ec1 <= ec0 {
			t.Fatalf("execution counts %d, then %d, %d: want increasing", first.Cells[0].ExecutionCount, ec0, ec1)
		}
		after := e.python(e.admin, id, pyCode("a"))
		if after.Status != "ok" || len(after.Cells[0].Outputs) != 1 || after.Cells[0].Outputs[0].Type != "execute_result" ||
			after.Cells[0].Outputs[0].Text != "42" {
			t.Fatalf("state after the failed call (want 42: cell 1 ran, cell 3 did not): %+v", after)
		}
		if ec := after.Cells[0].ExecutionCount; ec <= res.Cells[1].ExecutionCount || after.Cells[0].Outputs[0].ExecutionCount != ec {
			t.Fatalf("execution count %d (output %d) after %d", ec, after.Cells[0].Outputs[0].ExecutionCount, res.Cells[1].ExecutionCount)
		}
	})

	t.Run("Outputs", func(t *testing.T) {
		e := e.pySub(t)
		res, r := e.pythonRaw(e.admin, id, pyCode(
			"import sys\nprint('hello out')\nprint('hello err', file=sys.stderr)",
			"import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [4, 1, 9])\nplt.show()",
			"import pandas as pd\npd.DataFrame({'alpha_col': [1, 2], 'beta_col': [3.5, 4.5]})",
		))
		if res.Status != "ok" || len(res.Cells) != 3 {
			t.Fatalf("outputs call: %+v", res)
		}
		c := res.Cells[0]
		if c.stdout() != "hello out\n" || len(c.ofType("stream")) < 2 {
			t.Fatalf("print: %+v", c.Outputs)
		}
		var stderr string
		for _, o := range c.ofType("stream") {
			if o.Name == "stderr" {
				stderr += o.Text
			}
		}
		if stderr != "hello err\n" {
			t.Fatalf("stderr %q in %+v", stderr, c.Outputs)
		}

		// The figure: exactly one output, a PNG that decodes.
		c = res.Cells[1]
		if len(c.Outputs) != 1 || c.Outputs[0].Type != "display_data" || len(c.Outputs[0].PNG) == 0 {
			t.Fatalf("figure: want exactly one display_data with a PNG, got %d outputs: %s", len(c.Outputs), r.body)
		}
		if !bytes.Contains(r.body, []byte(`"png":"iVBORw0KGgo`)) {
			t.Fatal("the PNG is not base64 in the JSON")
		}
		img, err := png.Decode(bytes.NewReader(c.Outputs[0].PNG))
		if err != nil {
			t.Fatalf("PNG does not decode: %v", err)
		}
		if b := img.Bounds(); b.Dx() < 100 || b.Dy() < 100 || b.Dx() != c.Outputs[0].Width || b.Dy() != c.Outputs[0].Height {
			t.Fatalf("PNG of %v, output says %dx%d", b, c.Outputs[0].Width, c.Outputs[0].Height)
		}

		// The DataFrame: text with the column names.
		c = res.Cells[2]
		rs := c.ofType("execute_result")
		if len(c.Outputs) != 1 || len(rs) != 1 || !strings.Contains(rs[0].Text, "alpha_col") || !strings.Contains(rs[0].Text, "beta_col") {
			t.Fatalf("DataFrame: %+v", c.Outputs)
		}
		if rs[0].MIME != "text/plain" && rs[0].MIME != "text/markdown" {
			t.Fatalf("DataFrame as %q, want text/plain or text/markdown", rs[0].MIME)
		}

		// An exception from a nested call: ename, evalue, traceback, no ANSI.
		res, r = e.pythonRaw(e.admin, id, pyCode("def outer_fn():\n    return inner_fn()\ndef inner_fn():\n    raise ValueError('bad value here')\nouter_fn()"))
		errs := res.Cells[0].ofType("error")
		if res.Status != "error" || len(errs) != 1 || errs[0].EName != "ValueError" || errs[0].EValue != "bad value here" {
			t.Fatalf("exception: %s", r.body)
		}
		tb := strings.Join(errs[0].Traceback, "\n")
		if !strings.Contains(tb, "inner_fn") || !strings.Contains(tb, "ValueError") {
			t.Fatalf("traceback %q", tb)
		}
		if bytes.IndexByte(r.body, 0x1b) >= 0 || bytes.Contains(bytes.ToLower(r.body), []byte(`\u001b`)) {
			t.Fatalf("ANSI escape in the answer: %s", r.body)
		}

		// Output beyond max_output_bytes (1 MiB here) is cut, in order, with
		// a marker last; nothing is dropped silently.
		res = e.python(e.admin, id, pyCode("for i in range(250000):\n    print(i)"))
		c = res.Cells[0]
		out := c.stdout()
		var full strings.Builder
		for i := range 250000 {
			fmt.Fprintf(&full, "%d\n", i)
		}
		last := c.Outputs[len(c.Outputs)-1]
		if res.Status != "ok" || !c.Truncated || last.Type != "truncated" || !strings.Contains(last.Text, "dropped") ||
			len(out) < 512<<10 || len(out) >= full.Len() || !strings.HasPrefix(full.String(), out) {
			t.Fatalf("1.6 MB of output: status %s truncated %v, %d of %d bytes kept (in order: %v), last output %+v",
				res.Status, c.Truncated, len(out), full.Len(), strings.HasPrefix(full.String(), out), last)
		}

		// input() is answered at once and fails the cell; it never hangs.
		start := time.Now()
		res = e.python(e.admin, id, map[string]any{"timeout": 30, "cells": []map[string]any{{"code": "name = input('your name? ')"}, {"code": "1"}}})
		if took := time.Since(start); took > 10*time.Second {
			t.Fatalf("input() took %v", took)
		}
		if res.Status != "error" || res.Cancelled || res.FailedCell == nil || *res.FailedCell != 0 || !res.Cells[0].InputRequested ||
			res.Cells[1].Status != "skipped" || !strings.Contains(res.Message, "input()") {
			t.Fatalf("input(): %+v", res)
		}
	})

	t.Run("SSE", func(t *testing.T) {
		e := e.pySub(t)
		res := e.pythonSSE(context.Background(), e.admin, id, pyCode("import time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.3)"))
		defer res.Body.Close()
		if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
			b, _ := io.ReadAll(res.Body)
			t.Fatalf("SSE answer %d %q: %s", res.StatusCode, res.Header.Get("Content-Type"), b)
		}
		evs := readSSE(t, res.Body, nil)
		if len(evs) < 2 || evs[len(evs)-1].name != "result" {
			t.Fatalf("events %+v: want outputs, then one result last", evs)
		}
		var outs []sseEvent
		var text string
		for _, ev := range evs[:len(evs)-1] {
			if ev.name != "output" {
				t.Fatalf("event %q before the result: %+v", ev.name, evs)
			}
			var o struct {
				Cell   *int     `json:"cell"`
				Output pyOutput `json:"output"`
			}
			if err := json.Unmarshal([]byte(ev.data), &o); err != nil || o.Cell == nil || *o.Cell != 0 || o.Output.Type != "stream" || o.Output.Name != "stdout" {
				t.Fatalf("output event %q: %v", ev.data, err)
			}
			text += o.Output.Text
			outs = append(outs, ev)
		}
		if text != "0\n1\n2\n" {
			t.Fatalf("streamed text %q", text)
		}
		if gap := outs[len(outs)-1].at.Sub(outs[0].at); gap < 400*time.Millisecond {
			t.Fatalf("first and last output only %v apart: the output was buffered", gap)
		}
		var final pyResult
		if err := json.Unmarshal([]byte(evs[len(evs)-1].data), &final); err != nil {
			t.Fatal(err)
		}
		if final.Status != "ok" || len(final.Cells) != 1 || final.Cells[0].Status != "ok" || len(final.Cells[0].Outputs) != 0 {
			t.Fatalf("result event %s", evs[len(evs)-1].data)
		}

		// A quiet cell: the headers come at once, the result a second later.
		start := time.Now()
		res2 := e.pythonSSE(context.Background(), e.admin, id, pyCode("import time\ntime.sleep(1)"))
		defer res2.Body.Close()
		headers := time.Since(start)
		if res2.StatusCode != 200 || headers > 300*time.Millisecond {
			t.Fatalf("quiet SSE call: status %d, headers after %v", res2.StatusCode, headers)
		}
		evs = readSSE(t, res2.Body, nil)
		if len(evs) != 1 || evs[0].name != "result" || !strings.Contains(evs[0].data, `"status":"ok"`) {
			t.Fatalf("quiet call events %+v", evs)
		}
		if took := evs[0].at.Sub(start); took < 900*time.Millisecond {
			t.Fatalf("a 1 s cell answered after %v", took)
		}
	})

	t.Run("Timeout", func(t *testing.T) {
		e := e.pySub(t)
		e.python(e.admin, id, pyCode("kept = 'survives the timeout'"))
		start := time.Now()
		res := e.python(e.admin, id, map[string]any{"timeout": 2, "cells": []map[string]any{{"code": "import time\ntime.sleep(100)"}, {"code": "kept = 'overwritten'"}}})
		took := time.Since(start)
		if res.Status != "cancelled" || !res.Cancelled || !res.TimedOut || res.Message != "Command timed out after 2 seconds" {
			t.Fatalf("timeout 2: %+v", res)
		}
		if res.Cells[0].Status != "cancelled" || res.Cells[1].Status != "skipped" || res.KernelRestarted {
			t.Fatalf("timeout 2 cells: %+v", res)
		}
		if took < 2*time.Second || took > 8*time.Second {
			t.Fatalf("a 2 s timeout took %v", took)
		}
		if v := e.pyValue(id, "kept"); v != "'survives the timeout'" {
			t.Fatalf("after the timeout kept = %s (the kernel was restarted, not interrupted?)", v)
		}
	})

	t.Run("PerCall", func(t *testing.T) {
		e := e.pySub(t)
		e.python(e.admin, id, pyCode("session_only = 123"))
		res := e.python(e.admin, id, map[string]any{"mode": "per_call", "cells": []map[string]any{{"code": "per_call_only = 1"}, {"code": "session_only"}}})
		errs := res.Cells[1].ofType("error")
		if res.Status != "error" || res.FailedCell == nil || *res.FailedCell != 1 || len(errs) != 1 || errs[0].EName != "NameError" {
			t.Fatalf("per_call sees the session's state: %+v", res)
		}
		if ec := res.Cells[0].ExecutionCount; ec != 1 {
			t.Fatalf("per_call's first cell has execution_count %d, want 1 (a fresh kernel)", ec)
		}
		if v := e.pyValue(id, "session_only"); v != "123" {
			t.Fatalf("the session after per_call: session_only = %s", v)
		}
		e.pyNameError(id, "per_call_only")

		// per_call does not wait for the session: it runs while a session
		// cell sleeps.
		ch := e.pyStart(context.Background(), id, pyCode("import time\nopen('/tmp/py_busy', 'w').close()\ntime.sleep(100)"))
		eventually(t, 20*time.Second, "cell running", func() bool { return e.pyFileExists(id, "/tmp/py_busy") })
		res = e.python(e.admin, id, map[string]any{"mode": "per_call", "timeout": 20, "cells": []map[string]any{{"code": "6 * 7"}}})
		if res.Status != "ok" || len(res.Cells[0].Outputs) != 1 || res.Cells[0].Outputs[0].Text != "42" {
			t.Fatalf("per_call beside a busy session: %+v", res)
		}
		if r := e.do(e.admin, "POST", pyPath(id)+"/interrupt", nil); r.code != http.StatusNoContent {
			t.Fatalf("interrupt: %s", r)
		}
		if a := pyWait(t, ch, 5*time.Second, "interrupted call"); a.err != nil || a.r.code != 200 {
			t.Fatalf("interrupted call: %v %s", a.err, a.r)
		}
	})

	t.Run("Reset", func(t *testing.T) {
		e := e.pySub(t)
		e.python(e.admin, id, pyCode("before_reset = 1"))
		res := e.python(e.admin, id, map[string]any{"reset": true, "cells": []map[string]any{{"code": "after_reset = 2"}, {"code": "before_reset"}}})
		if res.Status != "error" || !res.KernelRestarted || res.FailedCell == nil || *res.FailedCell != 1 ||
			len(res.Cells[1].ofType("error")) != 1 || res.Cells[1].ofType("error")[0].EName != "NameError" {
			t.Fatalf("reset: %+v", res)
		}
		// Only before the first cell: what the call set stays.
		if v := e.pyValue(id, "after_reset"); v != "2" {
			t.Fatalf("after_reset = %s", v)
		}
	})

	t.Run("Concurrent", func(t *testing.T) {
		e := e.pySub(t)
		e.python(e.admin, id, pyCode("x = 0"))
		const n = 20
		var wg sync.WaitGroup
		got := make([]string, n)
		errs := make([]string, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := e.rawDo(e.admin, "POST", pyPath(id), strings.NewReader(`{"cells":[{"code":"x += 1; x"}]}`))
				if err != nil || r.code != 200 {
					errs[i] = fmt.Sprintf("%v %s", err, r)
					return
				}
				var res pyResult
				if err := json.Unmarshal(r.body, &res); err != nil || res.Status != "ok" || len(res.Cells) != 1 || len(res.Cells[0].Outputs) != 1 {
					errs[i] = fmt.Sprintf("%v %s", err, r)
					return
				}
				got[i] = res.Cells[0].Outputs[0].Text
			}()
		}
		wg.Wait()
		var vals []int
		for i := range n {
			if errs[i] != "" {
				t.Fatalf("concurrent call %d: %s", i, errs[i])
			}
			v, err := strconv.Atoi(got[i])
			if err != nil {
				t.Fatalf("concurrent call %d answered %q", i, got[i])
			}
			vals = append(vals, v)
		}
		sort.Ints(vals)
		for i, v := range vals {
			if v != i+1 {
				t.Fatalf("results %v, want exactly 1..%d", vals, n)
			}
		}
		if v := e.pyValue(id, "x"); v != strconv.Itoa(n) {
			t.Fatalf("x = %s after %d increments", v, n)
		}
	})

	t.Run("ClientDisconnect", func(t *testing.T) {
		e := e.pySub(t)
		e.python(e.admin, id, pyCode("disc = 7"))

		// Unary: the client goes away while the cell sleeps.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ch := e.pyStart(ctx, id, pyCode("import time\nopen('/tmp/py_disc_unary', 'w').close()\ntime.sleep(100)"))
		eventually(t, 20*time.Second, "cell running", func() bool { return e.pyFileExists(id, "/tmp/py_disc_unary") })
		cancel()
		if a := pyWait(t, ch, 5*time.Second, "cancelled request"); a.err == nil {
			t.Fatalf("the cancelled request answered %s", a.r)
		}
		start := time.Now()
		if v := e.pyValue(id, "disc"); v != "7" {
			t.Fatalf("after a disconnect disc = %s (the kernel was restarted?)", v)
		}
		if took := time.Since(start); took > 3*time.Second {
			t.Fatalf("the call after a disconnect took %v: the sleeping cell was not interrupted", took)
		}

		// SSE: the client goes away after the first output.
		ctx2, cancel2 := context.WithCancel(context.Background())
		defer cancel2()
		res := e.pythonSSE(ctx2, e.admin, id, pyCode("import time\nprint('going to sleep', flush=True)\ntime.sleep(100)"))
		evs := readSSE(t, res.Body, func(sseEvent) bool { return false })
		if len(evs) != 1 || evs[0].name != "output" {
			t.Fatalf("first SSE event %+v", evs)
		}
		cancel2()
		res.Body.Close()
		start = time.Now()
		if v := e.pyValue(id, "disc + 1"); v != "8" {
			t.Fatalf("after an SSE disconnect disc + 1 = %s", v)
		}
		if took := time.Since(start); took > 3*time.Second {
			t.Fatalf("the call after an SSE disconnect took %v", took)
		}

		// A queued call whose client leaves never runs.
		chA := e.pyStart(context.Background(), id, pyCode("import time\nopen('/tmp/py_queue_a', 'w').close()\ntime.sleep(100)"))
		eventually(t, 20*time.Second, "cell running", func() bool { return e.pyFileExists(id, "/tmp/py_queue_a") })
		ctxB, cancelB := context.WithCancel(context.Background())
		defer cancelB()
		chB := e.pyStart(ctxB, id, pyCode("queued_ran = True"))
		time.Sleep(300 * time.Millisecond) // B waits behind A
		cancelB()
		if a := pyWait(t, chB, 5*time.Second, "cancelled queued request"); a.err == nil {
			t.Fatalf("the cancelled queued request answered %s", a.r)
		}
		time.Sleep(500 * time.Millisecond) // the cancel reaches the agent
		if r := e.do(e.admin, "POST", pyPath(id)+"/interrupt", nil); r.code != http.StatusNoContent {
			t.Fatalf("interrupt: %s", r)
		}
		if a := pyWait(t, chA, 5*time.Second, "interrupted call"); a.err != nil || a.r.code != 200 || !strings.Contains(string(a.r.body), "KeyboardInterrupt") {
			t.Fatalf("interrupted call: %v %s", a.err, a.r)
		}
		e.pyNameError(id, "queued_ran")
	})

	t.Run("InterruptAndRestart", func(t *testing.T) {
		e := e.pySub(t)
		e.python(e.admin, id, pyCode("before_interrupt = 'still here'"))
		// Interrupting an idle kernel is harmless.
		if r := e.do(e.admin, "POST", pyPath(id)+"/interrupt", nil); r.code != http.StatusNoContent {
			t.Fatalf("idle interrupt: %s", r)
		}
		if v := e.pyValue(id, "before_interrupt"); v != "'still here'" {
			t.Fatalf("after an idle interrupt: %s", v)
		}

		// A running cell gets KeyboardInterrupt: the cell failed (status
		// error, not a cancelled call), the state stays.
		ch := e.pyStart(context.Background(), id, pyCode("import time\nopen('/tmp/py_interrupt', 'w').close()\ntime.sleep(100)", "before_interrupt = 'overwritten'"))
		eventually(t, 20*time.Second, "cell running", func() bool { return e.pyFileExists(id, "/tmp/py_interrupt") })
		if r := e.do(e.admin, "POST", pyPath(id)+"/interrupt", nil); r.code != http.StatusNoContent {
			t.Fatalf("interrupt: %s", r)
		}
		a := pyWait(t, ch, 5*time.Second, "interrupted call")
		if a.err != nil || a.r.code != 200 {
			t.Fatalf("interrupted call: %v %s", a.err, a.r)
		}
		var res pyResult
		a.r.json(t, &res)
		errs := res.Cells[0].ofType("error")
		if res.Status != "error" || res.FailedCell == nil || *res.FailedCell != 0 || res.Cancelled || res.TimedOut ||
			len(errs) != 1 || errs[0].EName != "KeyboardInterrupt" || res.Cells[1].Status != "skipped" {
			t.Fatalf("interrupted call: %s", a.r.body)
		}
		if v := e.pyValue(id, "before_interrupt"); v != "'still here'" {
			t.Fatalf("after an interrupt: %s", v)
		}

		// Restart while a cell runs: the call ends cancelled, 204, the state is gone.
		ch = e.pyStart(context.Background(), id, pyCode("import time\nopen('/tmp/py_restart', 'w').close()\ntime.sleep(100)"))
		eventually(t, 20*time.Second, "cell running", func() bool { return e.pyFileExists(id, "/tmp/py_restart") })
		if r := e.do(e.admin, "POST", pyPath(id)+"/restart", nil); r.code != http.StatusNoContent {
			t.Fatalf("restart: %s", r)
		}
		a = pyWait(t, ch, 10*time.Second, "call during a restart")
		if a.err != nil || a.r.code != 200 {
			t.Fatalf("call during a restart: %v %s", a.err, a.r)
		}
		a.r.json(t, &res)
		if res.Status != "cancelled" || !res.Cancelled || res.TimedOut || res.Cells[0].Status != "cancelled" {
			t.Fatalf("call during a restart: %s", a.r.body)
		}
		e.pyNameError(id, "before_interrupt")
		if r := e.do(e.admin, "POST", pyPath(id)+"/restart", `{"hard":true}`); r.code != http.StatusBadRequest {
			t.Fatalf("restart with an unknown field: %s", r)
		}
	})

	t.Run("Validation", func(t *testing.T) {
		e := e.pySub(t)
		manyCells := `{"cells":[` + strings.Repeat(`{"code":"1"},`, 64) + `{"code":"1"}]}`
		for _, tc := range []struct {
			body, param, word string
		}{
			{`{}`, "cells", "cell"},
			{`{"cells":[]}`, "cells", "cell"},
			{manyCells, "cells", "cell"},
			{`{"cells":[{"code":"1"}],"timeout":601}`, "timeout", "timeout"},
			{`{"cells":[{"code":"1"}],"timeout":-1}`, "timeout", "timeout"},
			{`{"cells":[{"code":"1"}],"mode":"bogus"}`, "mode", "mode"},
			{`{"cells":[{"code":"1"}],"bogus_field":1}`, "bogus_field", "bogus_field"},
		} {
			for _, accept := range []string{"application/json", "text/event-stream"} {
				r := e.doCtx(context.Background(), e.admin, "POST", pyPath(id), tc.body, map[string]string{"Accept": accept})
				ae := r.wantError(t, http.StatusBadRequest, "invalid_request")
				if !strings.Contains(ae.Error.Message, tc.word) {
					t.Errorf("%.80s: message %q does not mention %s", tc.body, ae.Error.Message, tc.word)
				}
				if ae.Error.Param == nil || *ae.Error.Param != tc.param {
					t.Errorf("%.80s (Accept %s): param %v, want %q: %s", tc.body, accept, ae.Error.Param, tc.param, r)
				}
			}
		}
		// A cell over 1 MiB is too large; a working directory that does not
		// exist is a bad request.
		e.do(e.admin, "POST", pyPath(id), pyCode(strings.Repeat("#", 1<<20+1))).wantError(t, http.StatusRequestEntityTooLarge, "too_large")
		e.do(e.admin, "POST", pyPath(id), map[string]any{"cwd": "no/such/dir", "cells": []map[string]any{{"code": "1"}}}).wantError(t, http.StatusBadRequest, "invalid_request")
		e.sh(e.admin, id, "mkdir -p py/sub")
		if v := e.pyValue(id, "import os\nos.getcwd()"); v != "'/workspace'" {
			t.Fatalf("default cwd %s", v)
		}
		res := e.python(e.admin, id, map[string]any{"cwd": "py/sub", "cells": []map[string]any{{"code": "import os\nos.getcwd()"}}})
		if res.Status != "ok" || len(res.Cells[0].Outputs) != 1 || res.Cells[0].Outputs[0].Text != "'/workspace/py/sub'" {
			t.Fatalf("cwd py/sub: %+v", res)
		}
		// Streamed, the headers are already sent: the error is an event.
		sres := e.pythonSSE(context.Background(), e.admin, id, map[string]any{"cwd": "no/such/dir", "cells": []map[string]any{{"code": "1"}}})
		evs := readSSE(t, sres.Body, nil)
		sres.Body.Close()
		if len(evs) != 1 || evs[0].name != "error" || !strings.Contains(evs[0].data, `"code":"invalid_request"`) {
			t.Fatalf("streamed call with a bad cwd: %d %+v", sres.StatusCode, evs)
		}
		// The limits themselves are accepted.
		if res := e.python(e.admin, id, map[string]any{"timeout": 600, "mode": "session", "cells": []map[string]any{{"code": "1"}}}); res.Status != "ok" {
			t.Fatalf("timeout 600: %+v", res)
		}

		// Another organisation's key sees no such computer.
		_, other := e.newKey(e.newOrg("python-other", true), computerCaps)
		e.do(other, "POST", pyPath(id), pyCode("1")).wantError(t, http.StatusNotFound, "not_found")
		for _, path := range []string{pyPath(id) + "/interrupt", pyPath(id) + "/restart"} {
			e.do(other, "POST", path, nil).wantError(t, http.StatusNotFound, "not_found")
		}
		e.doCtx(context.Background(), other, "POST", pyPath(id), pyCode("1"), map[string]string{"Accept": "text/event-stream"}).wantError(t, http.StatusNotFound, "not_found")
	})

	t.Run("CrashPolicy", func(t *testing.T) {
		e := e.pySub(t)
		c := e.create(e.admin, nil).ID
		defer e.do(e.admin, "DELETE", "/v1/computers/"+c, nil)
		const permanent = "The Python kernel crashed twice and was not restarted again."
		kill := pyCode("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", "never_runs = 1")
		res := e.python(e.admin, c, kill)
		if res.Status != "error" || res.FailedCell == nil || *res.FailedCell != 0 || res.Cells[1].Status != "skipped" ||
			!strings.Contains(res.Message, "SIGKILL") || strings.Contains(res.Message, permanent) {
			t.Fatalf("first crash: %+v", res)
		}
		res = e.python(e.admin, c, pyCode("survivor = 1"))
		if res.Status != "ok" || !res.KernelRestarted {
			t.Fatalf("after the first crash (want a restarted kernel): %+v", res)
		}
		res = e.python(e.admin, c, kill)
		if res.Status != "error" || !strings.HasSuffix(res.Message, permanent) {
			t.Fatalf("second crash: %+v", res)
		}
		res = e.python(e.admin, c, pyCode("1"))
		if res.Status != "error" || res.Message != permanent || res.Cells[0].Status != "skipped" {
			t.Fatalf("after the second crash: %+v", res)
		}
		if r := e.do(e.admin, "POST", pyPath(c)+"/restart", nil); r.code != http.StatusNoContent {
			t.Fatalf("restart after the permanent failure: %s", r)
		}
		if v := e.pyValue(c, "'alive again'"); v != "'alive again'" {
			t.Fatalf("after a restart: %s", v)
		}
	})

	t.Run("AuditAndGone", func(t *testing.T) {
		e := e.pySub(t)
		c := e.create(e.admin, nil).ID
		res := e.python(e.admin, c, map[string]any{"cells": []map[string]any{{"code": "m = 'PYAUDIT_MARKER_VALUE'\nprint(m)", "title": "PYAUDIT_MARKER_TITLE"}}})
		if res.Status != "ok" || res.Cells[0].stdout() != "PYAUDIT_MARKER_VALUE\n" {
			t.Fatalf("marker call: %+v", res)
		}
		if res = e.python(e.admin, c, pyCode("raise RuntimeError('PYAUDIT_MARKER_ERROR')")); res.Status != "error" {
			t.Fatalf("failing marker call: %+v", res)
		}
		if res = e.python(e.admin, c, map[string]any{"mode": "per_call", "cells": []map[string]any{{"code": "'PYAUDIT_MARKER_PERCALL'"}, {"code": "2"}}}); res.Status != "ok" {
			t.Fatalf("per_call marker call: %+v", res)
		}
		body := e.do(e.admin, "GET", "/v1/audit", nil).body
		if bytes.Contains(body, []byte("PYAUDIT_MARKER")) {
			t.Fatalf("code, titles or output reached the audit: %s", body)
		}
		for _, name := range []string{"cubicle.db", "cubicle.db-wal"} {
			b, err := os.ReadFile(filepath.Join(e.dir, name))
			if err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			if bytes.Contains(b, []byte("PYAUDIT_MARKER")) {
				t.Fatalf("a marker is stored in %s", name)
			}
		}
		ex := eventsOf(e.audit(e.admin, "?type=computer.executed"), c, "computer.executed")
		if len(ex) != 3 {
			t.Fatalf("computer.executed events for 3 python calls: %+v", ex)
		}
		for i, want := range []struct {
			status string
			cells  float64
		}{{"ok", 1}, {"error", 1}, {"ok", 2}} {
			d := ex[i].Data
			if d["kind"] != "python" || d["status"] != want.status || d["cells"] != want.cells || ex[i].KeyID != e.adminKeyID() {
				t.Fatalf("computer.executed %d: %+v", i, ex[i])
			}
			if _, ok := d["duration_ms"].(float64); !ok {
				t.Fatalf("computer.executed %d lacks duration_ms: %+v", i, d)
			}
			for k := range d {
				if k != "kind" && k != "status" && k != "cells" && k != "duration_ms" {
					t.Fatalf("computer.executed %d has an unexpected field %q: %+v", i, k, d)
				}
			}
		}

		// Deleting the computer ends a running call; then 409 on every python
		// endpoint, streamed or not.
		ch := e.pyStart(context.Background(), c, pyCode("import time\nopen('/tmp/py_delete', 'w').close()\ntime.sleep(100)"))
		eventually(t, 20*time.Second, "cell running", func() bool { return e.pyFileExists(c, "/tmp/py_delete") })
		if r := e.do(e.admin, "DELETE", "/v1/computers/"+c, nil); r.code != http.StatusNoContent {
			t.Fatalf("delete: %s", r)
		}
		// (503 computer_unavailable today, as for exec; 409 would also do.)
		if a := pyWait(t, ch, 10*time.Second, "call in a deleted computer"); a.err != nil ||
			(a.r.code != http.StatusServiceUnavailable && a.r.code != http.StatusConflict) {
			t.Fatalf("a call in a deleted computer answered %v %s", a.err, a.r)
		} else {
			a.r.wantError(t, a.r.code, "")
		}
		e.do(e.admin, "POST", pyPath(c), pyCode("1")).wantError(t, http.StatusConflict, "computer_gone")
		for _, path := range []string{pyPath(c) + "/interrupt", pyPath(c) + "/restart"} {
			e.do(e.admin, "POST", path, nil).wantError(t, http.StatusConflict, "computer_gone")
		}
		e.doCtx(context.Background(), e.admin, "POST", pyPath(c), pyCode("1"), map[string]string{"Accept": "text/event-stream"}).wantError(t, http.StatusConflict, "computer_gone")
	})
}

// pyBoottime is CLOCK_BOOTTIME in seconds, the clock of /proc/<pid>/stat's
// start times.
func pyBoottime(t *testing.T) float64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		t.Fatal(err)
	}
	return float64(ts.Sec) + float64(ts.Nsec)/1e9
}

// kernelStarted is when the session kernel of computer id started, in
// seconds since boot (pyBoottime's clock).
func kernelStarted(t *testing.T, e *env, id string) float64 {
	t.Helper()
	v := e.pyValue(id, "import os\nwith open('/proc/self/stat') as f:\n    st = f.read().rsplit(')', 1)[1].split()\nint(st[19]) / os.sysconf('SC_CLK_TCK')")
	started, err := strconv.ParseFloat(v, 64)
	if err != nil {
		t.Fatalf("kernel start time %q: %v", v, err)
	}
	return started
}

// TestPythonWarmPoolOtherMemory (issue 15 goal 2): a create that asks for
// less memory than the pool's is still served by a pool computer, warm
// kernel and all, with the asked limit in force on its live cgroup; one
// that asks for less than the warm kernel holds gets a computer of its
// own, and works.
func TestPythonWarmPoolOtherMemory(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *computer.Config) { c.PoolSize = 1; c.Prelude = config.DefaultPrelude })
	eventually(t, 45*time.Second, "pool filled", func() bool { return e.metric("cubicle_pool_depth") == 1 })
	waiting := poolIDs(t, e)
	beforeCreate := pyBoottime(t)
	v := e.create(e.admin, map[string]any{"memory_mb": 192}) // the pool's have 256
	if !waiting[v.ID] || v.Limits.MemoryMB != 192 {
		t.Fatalf("a 192 MiB create made %s (memory %d MiB), not the pool's %v", v.ID, v.Limits.MemoryMB, waiting)
	}
	res := e.python(e.admin, v.ID, pyCode("pd.DataFrame({'a':[1]}).describe()"))
	if res.Status != "ok" || res.KernelRestarted {
		t.Fatalf("first cell in a claimed pool computer: %+v", res)
	}
	if started := kernelStarted(t, e, v.ID); started >= beforeCreate {
		t.Fatalf("the kernel started %.2f s after the create began: it was not warm", started-beforeCreate)
	}
	bomb := e.exec(e.admin, v.ID, map[string]any{"argv": []string{"/usr/bin/python3", "-c",
		"a=[]\nfor i in range(24):\n  a.append(bytearray(16<<20))\nprint('escaped')"}})
	if !bomb.OOMKilled || strings.Contains(bomb.Stdout, "escaped") {
		t.Fatalf("384 MiB in a 192 MiB computer: %+v", bomb)
	}

	eventually(t, 45*time.Second, "pool refilled", func() bool { return e.metric("cubicle_pool_depth") == 1 })
	var pooled string
	for id := range poolIDs(t, e) {
		if id != v.ID {
			pooled = id
		}
	}
	small := e.create(e.admin, map[string]any{"memory_mb": 64})
	if small.ID == pooled {
		t.Fatalf("a 64 MiB create was served by the pool computer %s, whose warm kernel holds more", small.ID)
	}
	if out := e.sh(e.admin, small.ID, "echo own"); out != "own\n" {
		t.Fatalf("the 64 MiB computer: %q", out)
	}
	eventually(t, 45*time.Second, "the refused pool computer gone and the pool refilled", func() bool {
		return e.metric("cubicle_pool_depth") == 1 && !poolIDs(t, e)[pooled]
	})
}

// TestPythonWarmPool: a pool computer's kernel is started, with the
// default prelude, before the computer is handed out, so the first cell of
// a new computer uses pandas without importing it and does not start a
// kernel.
func TestPythonWarmPool(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *computer.Config) { c.PoolSize = 1; c.Prelude = config.DefaultPrelude })
	eventually(t, 45*time.Second, "pool filled", func() bool { return e.metric("cubicle_pool_depth") == 1 })
	beforeCreate := pyBoottime(t)
	id := e.create(e.admin, nil).ID
	start := time.Now()
	res := e.python(e.admin, id, pyCode("pd.DataFrame({'a':[1]}).describe()"))
	took := time.Since(start)
	rs := res.Cells[0].ofType("execute_result")
	if res.Status != "ok" || len(rs) != 1 || !strings.Contains(rs[0].Text, "count") || !strings.Contains(rs[0].Text, "mean") || res.KernelRestarted {
		t.Fatalf("first cell in a pool computer: %+v", res)
	}
	t.Logf("first cell in a warm computer: %v (duration_ms %d)", took, res.DurationMS)

	// The kernel that ran it was started before the computer was created.
	if started := kernelStarted(t, e, id); started >= beforeCreate {
		t.Fatalf("the kernel started %.2f s after the create began: it was not warm", started-beforeCreate)
	}
	// The prelude's other imports are there too.
	if v := e.pyValue(id, "(np.__name__, plt.__name__, matplotlib.get_backend())"); !strings.Contains(v, "'numpy'") || !strings.Contains(v, "inline") {
		t.Fatalf("prelude names: %s", v)
	}
}
