package linux_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/testbin"
)

// relayConn drives a relayed kernel as a Jupyter client would.
type relayConn struct {
	t    testing.TB
	k    sandbox.Kernel
	seen []sandbox.KernelMessage // everything received, in order
	seq  int
}

func openRelay(t testing.TB, sb sandbox.Sandbox, start sandbox.KernelStart) *relayConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	k, err := sb.OpenKernel(ctx, start)
	if err != nil {
		t.Fatalf("OpenKernel: %v", err)
	}
	t.Cleanup(func() { k.Close(context.Background()) })
	return &relayConn{t: t, k: k}
}

type jheader struct {
	MsgID   string `json:"msg_id"`
	MsgType string `json:"msg_type"`
}

func headerOf(raw json.RawMessage) jheader {
	var h jheader
	_ = json.Unmarshal(raw, &h)
	return h
}

func (c *relayConn) message(channel, msgType string, parent json.RawMessage, content any) sandbox.KernelMessage {
	c.seq++
	id := fmt.Sprintf("client-%d", c.seq)
	h, _ := json.Marshal(map[string]string{"msg_id": id, "msg_type": msgType, "session": "test-session", "username": "test", "date": time.Now().UTC().Format(time.RFC3339Nano), "version": "5.3"})
	b, _ := json.Marshal(content)
	if parent == nil {
		parent = json.RawMessage("{}")
	}
	return sandbox.KernelMessage{Channel: channel, Header: h, ParentHeader: parent, Metadata: json.RawMessage("{}"), Content: b}
}

func (c *relayConn) send(m sandbox.KernelMessage) string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.k.Send(ctx, m); err != nil {
		c.t.Fatalf("Send %s: %v", headerOf(m.Header).MsgType, err)
	}
	return headerOf(m.Header).MsgID
}

// execute sends an execute_request and returns its msg_id. stop_on_error
// is off: with it, ipykernel aborts requests that arrive shortly after a
// failed cell, even once it is idle (its abort ends a loop turn later),
// which the tests' back-to-back requests would hit.
func (c *relayConn) execute(code string) string {
	c.t.Helper()
	return c.send(c.message("shell", "execute_request", nil, map[string]any{
		"code": code, "silent": false, "store_history": true, "user_expressions": map[string]any{}, "allow_stdin": true, "stop_on_error": false}))
}

// find returns the first message (received so far or later) that matches,
// at or after index from.
func (c *relayConn) find(from int, what string, match func(sandbox.KernelMessage) bool) (sandbox.KernelMessage, int) {
	c.t.Helper()
	for i := from; i < len(c.seen); i++ {
		if match(c.seen[i]) {
			return c.seen[i], i
		}
	}
	timeout := time.After(60 * time.Second)
	for {
		select {
		case m, ok := <-c.k.Messages():
			if !ok {
				c.t.Fatalf("waiting for %s: the relay ended: %v", what, c.k.Err())
			}
			c.seen = append(c.seen, m)
			if match(m) {
				return m, len(c.seen) - 1
			}
		case <-timeout:
			c.t.Fatalf("no %s within 60 s; got %s", what, c.summary())
		}
	}
}

func (c *relayConn) summary() string {
	var s []string
	for _, m := range c.seen[max(0, len(c.seen)-20):] {
		s = append(s, fmt.Sprintf("%s/%s %.80s", m.Channel, headerOf(m.Header).MsgType, m.Content))
	}
	return strings.Join(s, "; ")
}

func isReply(id string) func(sandbox.KernelMessage) bool {
	return func(m sandbox.KernelMessage) bool {
		return m.Channel == "shell" && headerOf(m.ParentHeader).MsgID == id
	}
}

func isIOPub(id, msgType string) func(sandbox.KernelMessage) bool {
	return func(m sandbox.KernelMessage) bool {
		return m.Channel == "iopub" && headerOf(m.ParentHeader).MsgID == id && headerOf(m.Header).MsgType == msgType
	}
}

func isStatus(state string) func(sandbox.KernelMessage) bool {
	return func(m sandbox.KernelMessage) bool {
		var c struct {
			State string `json:"execution_state"`
		}
		_ = json.Unmarshal(m.Content, &c)
		return m.Channel == "iopub" && headerOf(m.Header).MsgType == "status" && c.State == state
	}
}

// run executes code and returns its execute_reply content, after the
// kernel went idle.
func (c *relayConn) run(code string) map[string]any {
	c.t.Helper()
	id := c.execute(code)
	reply, _ := c.find(0, "execute_reply", isReply(id))
	c.find(0, "status idle", func(m sandbox.KernelMessage) bool { return isIOPub(id, "status")(m) && isStatus("idle")(m) })
	var content map[string]any
	if err := json.Unmarshal(reply.Content, &content); err != nil {
		c.t.Fatal(err)
	}
	return content
}

// result returns the text/plain of code's execute_result ("error: <ename>"
// when it raised), once the kernel is idle again.
func (c *relayConn) result(code string) string {
	c.t.Helper()
	id := c.execute(code)
	m, _ := c.find(0, "execute_result of "+code, func(m sandbox.KernelMessage) bool {
		return isIOPub(id, "execute_result")(m) || isIOPub(id, "error")(m)
	})
	c.find(0, "status idle", func(m sandbox.KernelMessage) bool { return isIOPub(id, "status")(m) && isStatus("idle")(m) })
	var content struct {
		Data  map[string]string `json:"data"`
		EName string            `json:"ename"`
	}
	_ = json.Unmarshal(m.Content, &content)
	if content.EName != "" {
		return "error: " + content.EName
	}
	return content.Data["text/plain"]
}

// assertNoProcesses checks that nothing runs in sb but the probe itself
// (the agent, PID 1, is hidden from it).
func assertNoProcesses(t testing.TB, sb sandbox.Sandbox) {
	t.Helper()
	r := runReq(t, sb, sandbox.ExecRequest{Argv: []string{"/usr/bin/python3", "-c",
		"import os; print(sorted(p for p in os.listdir('/proc') if p.isdigit() and int(p) != os.getpid()))"}}, nil)
	if r.Stdout != "[]\n" {
		t.Errorf("processes left in the computer: %s %s", r.Stdout, r.Stderr)
	}
}

// TestKernelRelay drives relayed kernels in one computer through the
// Sandbox interface, as the Kernel Gateway API does.
func TestKernelRelay(t *testing.T) {
	t.Parallel()
	sb := newComputer(t, newDriver(t), nil)
	c := openRelay(t, sb, sandbox.KernelStart{Env: []string{"RELAY_VAR=from-client"}})

	t.Run("Execute", func(t *testing.T) {
		c.t = t
		id := c.execute("import os\n1+1")
		reply, ri := c.find(0, "execute_reply", isReply(id))
		var rc struct {
			Status         string `json:"status"`
			ExecutionCount int    `json:"execution_count"`
		}
		if err := json.Unmarshal(reply.Content, &rc); err != nil || rc.Status != "ok" || rc.ExecutionCount < 1 {
			t.Fatalf("execute_reply %s (%v)", reply.Content, err)
		}
		if headerOf(reply.Header).MsgType != "execute_reply" {
			t.Errorf("reply header %s", reply.Header)
		}
		busy, bi := c.find(0, "status busy", func(m sandbox.KernelMessage) bool { return isIOPub(id, "status")(m) && isStatus("busy")(m) })
		res, resi := c.find(0, "execute_result", isIOPub(id, "execute_result"))
		_, ii := c.find(0, "status idle", func(m sandbox.KernelMessage) bool { return isIOPub(id, "status")(m) && isStatus("idle")(m) })
		if !strings.Contains(string(res.Content), `"text/plain": "2"`) {
			t.Errorf("execute_result %s", res.Content)
		}
		if !(bi < resi && resi < ii) {
			t.Errorf("iopub out of order: busy %d, result %d, idle %d", bi, resi, ii)
		}
		t.Logf("busy %s; reply at %d", busy.Content, ri)
		if got := c.result("os.environ['RELAY_VAR'], os.getcwd(), os.getuid()"); got != "('from-client', '/workspace', 1000)" {
			t.Errorf("kernel env/cwd/uid: %s", got)
		}
	})

	t.Run("Complete", func(t *testing.T) {
		// The launcher imports jedi with the first completion request
		// (python_launcher.py): it must still complete, with jedi's types.
		c.t = t
		code := "import os\nos.pat" // path first: jedi types the first match even past its deadline
		id := c.send(c.message("shell", "complete_request", nil, map[string]any{"code": code, "cursor_pos": len(code)}))
		reply, _ := c.find(0, "complete_reply", isReply(id))
		var rc struct {
			Status   string   `json:"status"`
			Matches  []string `json:"matches"`
			Metadata struct {
				Types []struct {
					Text string `json:"text"`
					Type string `json:"type"`
				} `json:"_jupyter_types_experimental"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(reply.Content, &rc); err != nil || rc.Status != "ok" || !slices.Contains(rc.Matches, "path") {
			t.Fatalf("complete_reply %s (%v)", reply.Content, err)
		}
		typ := ""
		for _, m := range rc.Metadata.Types {
			if m.Text == "path" {
				typ = m.Type
			}
		}
		if typ != "module" { // jedi's; IPython's own completer says "<unknown>"
			t.Errorf("path completed as type %q, want jedi's \"module\": %s", typ, reply.Content)
		}
	})

	t.Run("CollectorOn", func(t *testing.T) {
		// The launcher starts the kernel with the cyclic collector off and
		// turns it on before serving; cyclic garbage of a cell is collected.
		c.t = t
		code := "import gc, weakref\nclass C: pass\na = C(); a.me = a; r = weakref.ref(a); del a\ngc.collect()\n(gc.isenabled(), r() is None)"
		if got := c.result(code); got != "(True, True)" {
			t.Errorf("collector enabled, cycle collected: %s", got)
		}
	})

	t.Run("Stdin", func(t *testing.T) {
		c.t = t
		id := c.execute("v = input('name? ')\nprint('hello', v)")
		req, _ := c.find(0, "input_request", func(m sandbox.KernelMessage) bool { return m.Channel == "stdin" })
		if h := headerOf(req.Header); h.MsgType != "input_request" || headerOf(req.ParentHeader).MsgID != id || !strings.Contains(string(req.Content), "name? ") {
			t.Fatalf("input_request %s %s %s", req.Header, req.ParentHeader, req.Content)
		}
		c.send(c.message("stdin", "input_reply", req.Header, map[string]string{"value": "relay"}))
		out, _ := c.find(0, "stream", isIOPub(id, "stream"))
		if !strings.Contains(string(out.Content), "hello relay") {
			t.Errorf("stream %s", out.Content)
		}
	})

	t.Run("Interrupt", func(t *testing.T) {
		c.t = t
		id := c.execute("import time\nprint('sleeping', flush=True)\ntime.sleep(60)")
		c.find(0, "stream", isIOPub(id, "stream"))
		start := time.Now()
		if err := c.k.Interrupt(context.Background()); err != nil {
			t.Fatal(err)
		}
		reply, _ := c.find(0, "execute_reply", isReply(id))
		if !strings.Contains(string(reply.Content), `"status": "error"`) || !strings.Contains(string(reply.Content), "KeyboardInterrupt") {
			t.Fatalf("reply after interrupt: %s", reply.Content)
		}
		t.Logf("interrupted in %v", time.Since(start))
		c.find(0, "status idle", func(m sandbox.KernelMessage) bool { return isIOPub(id, "status")(m) && isStatus("idle")(m) })
		if got := c.result("21*2"); got != "42" {
			t.Errorf("after interrupt: %s", got)
		}
	})

	t.Run("Restart", func(t *testing.T) {
		c.t = t
		if got := c.result("x = 7\nx"); got != "7" {
			t.Fatalf("x: %s", got)
		}
		before := kernelProcs(t, sb)
		if err := c.k.Restart(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := c.result("x"); got != "error: NameError" {
			t.Errorf("state after restart: %s", got)
		}
		after := kernelProcs(t, sb)
		if len(before) != 1 || len(after) != 1 || before[0] == after[0] {
			t.Errorf("kernel processes before %v, after %v", before, after)
		}
	})

	t.Run("Crash", func(t *testing.T) {
		c.t = t
		from := len(c.seen)
		c.execute("import os\nos._exit(1)")
		st, _ := c.find(from, "status restarting", isStatus("restarting"))
		var h map[string]any
		if err := json.Unmarshal(st.Header, &h); err != nil || h["msg_type"] != "status" || h["version"] != "5.3" || h["session"] == "" || h["msg_id"] == "" || h["date"] == "" {
			t.Errorf("status header %s", st.Header)
		}
		if string(st.ParentHeader) != "{}" || string(st.Metadata) != "{}" {
			t.Errorf("status parent %s metadata %s", st.ParentHeader, st.Metadata)
		}
		if got := c.result("1+2"); got != "3" {
			t.Errorf("after the crash: %s", got)
		}
		if err := c.k.Err(); err != nil {
			t.Fatalf("relay ended: %v", err)
		}
	})

	t.Run("OOM", func(t *testing.T) {
		c.t = t
		from := len(c.seen)
		c.execute("a = []\nfor i in range(64):\n    a.append(bytearray(16 << 20))") // 1 GiB > the 512 MiB limit
		c.find(from, "status restarting", isStatus("restarting"))
		if got := c.result("'alive'"); got != "'alive'" {
			t.Errorf("after the OOM kill: %s", got)
		}
	})

	t.Run("BigMessages", func(t *testing.T) {
		c.t = t
		// 5 MB each way: the request carries the data (in a content field
		// ipykernel ignores, not in code it would have to compile), the
		// display returns it reversed.
		data := strings.Repeat("0123456789", 500_000)
		start := time.Now()
		id := c.send(c.message("shell", "execute_request", nil, map[string]any{
			"code": "s = get_ipython().kernel.get_parent('shell')['content']['data']\n" +
				"from IPython.display import display\ndisplay({'text/plain': s[::-1]}, raw=True)\nlen(s)",
			"data": data, "silent": false, "store_history": true, "user_expressions": map[string]any{}, "allow_stdin": true, "stop_on_error": false}))
		m, _ := c.find(0, "display_data", isIOPub(id, "display_data"))
		var content struct {
			Data map[string]string `json:"data"`
		}
		if err := json.Unmarshal(m.Content, &content); err != nil {
			t.Fatal(err)
		}
		if got := content.Data["text/plain"]; len(got) != len(data) || got[:10] != "9876543210" {
			t.Fatalf("display of %d bytes, starting %q", len(got), got[:min(10, len(got))])
		}
		if r, _ := c.find(0, "execute_result", isIOPub(id, "execute_result")); !strings.Contains(string(r.Content), `"5000000"`) {
			t.Errorf("len: %s", r.Content)
		}
		t.Logf("5 MB round trip in %v", time.Since(start))
		start = time.Now()
		id = c.execute("display({'text/plain': '7' * 5_000_000}, raw=True)")
		m, _ = c.find(0, "display_data", isIOPub(id, "display_data"))
		if len(m.Content) < 5_000_000 {
			t.Errorf("display of %d bytes", len(m.Content))
		}
		t.Logf("5 MB display in %v", time.Since(start))
	})

	t.Run("OversizedRefused", func(t *testing.T) {
		c.t = t
		m := c.message("shell", "execute_request", nil, map[string]any{"code": "1"})
		m.Buffers = [][]byte{make([]byte, sandbox.MaxKernelMessage)}
		err := c.k.Send(context.Background(), m)
		if !errors.Is(err, sandbox.ErrInvalid) || !strings.Contains(err.Error(), "the limit is 33554432") {
			t.Fatalf("oversized Send: %v", err)
		}
		bad := c.message("shell", "execute_request", nil, nil)
		bad.Content = json.RawMessage(`[1]`)
		if err := c.k.Send(context.Background(), bad); !errors.Is(err, sandbox.ErrInvalid) {
			t.Errorf("content that is not an object: %v", err)
		}
		if got := c.result("'still here'"); got != "'still here'" {
			t.Errorf("after refused messages: %s", got)
		}
	})

	t.Run("OnePerComputer", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := sb.OpenKernel(ctx, sandbox.KernelStart{})
		if !errors.Is(err, sandbox.ErrKernelBusy) {
			t.Errorf("second OpenKernel: %v", err)
		}
	})

	t.Run("Close", func(t *testing.T) {
		c.t = t
		c.execute("import time\ntime.sleep(60)") // busy: Close must not wait for it
		if err := c.k.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		for range c.k.Messages() {
		}
		if err := c.k.Err(); !errors.Is(err, sandbox.ErrKernelClosed) {
			t.Errorf("Err after Close: %v", err)
		}
		if procs := kernelProcs(t, sb); len(procs) != 0 {
			t.Errorf("kernel processes after Close: %v", procs)
		}
		assertNoProcesses(t, sb)
	})

	t.Run("Cwd", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := sb.OpenKernel(ctx, sandbox.KernelStart{Cwd: "/nonexistent"}); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("missing cwd: %v", err)
		}
		mustSucceed(t, sb, "mkdir -p /workspace/proj")
		w := openRelay(t, sb, sandbox.KernelStart{Cwd: "proj"})
		if got := w.result("import os; os.getcwd()"); got != "'/workspace/proj'" {
			t.Errorf("cwd: %s", got)
		}
		w.k.Close(context.Background())
	})

	t.Run("SlowConsumer", func(t *testing.T) {
		// A consumer that stops reading while the kernel floods iopub: the
		// relay ends with ErrKernelBacklog (nothing silently dropped), and
		// only that relay.
		s := openRelay(t, sb, sandbox.KernelStart{})
		s.execute("import sys\nfor i in range(150):\n    sys.stdout.write('x' * 1_000_000); sys.stdout.flush()")
		deadline := time.Now().Add(60 * time.Second)
		for s.k.Err() == nil && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		for range s.k.Messages() {
		}
		if err := s.k.Err(); !errors.Is(err, sandbox.ErrKernelBacklog) {
			t.Fatalf("Err: %v", err)
		}
		assertNoProcesses(t, sb)
	})

	t.Run("HostileKernel", func(t *testing.T) {
		h := openRelay(t, sb, sandbox.KernelStart{})
		h.execute(`
import os, socket, struct, time
from ipykernel.kernelapp import IPKernelApp
port = IPKernelApp.instance().iopub_port
time.sleep(0.3)
` + testbin.ForgeHugeFrame("port") + "time.sleep(5)\n")
		h.find(0, "status dead", isStatus("dead"))
		for range h.k.Messages() {
		}
		err := h.k.Err()
		if !errors.Is(err, sandbox.ErrKernelDead) || !strings.Contains(err.Error(), "kernel sent a frame of 4611686018427387904 bytes") {
			t.Fatalf("Err: %v", err)
		}
		assertNoProcesses(t, sb)
		// Only that relay ended: the computer and the next relay work.
		mustSucceed(t, sb, "true")
		n := openRelay(t, sb, sandbox.KernelStart{})
		if got := n.result("6*7"); got != "42" {
			t.Errorf("next relay: %s", got)
		}
		n.k.Close(context.Background())
	})

	t.Run("CrashLimit", func(t *testing.T) {
		d := openRelay(t, sb, sandbox.KernelStart{RestartLimit: 1})
		// A client's own shutdown_request: restarted, but not a crash.
		id := d.send(d.message("control", "shutdown_request", nil, map[string]any{"restart": false}))
		d.find(0, "shutdown_reply", func(m sandbox.KernelMessage) bool {
			return m.Channel == "control" && headerOf(m.ParentHeader).MsgID == id
		})
		_, i := d.find(0, "status restarting", isStatus("restarting"))
		if got := d.result("'up'"); got != "'up'" {
			t.Fatalf("after shutdown_request: %s", got)
		}
		d.execute("import os\nos._exit(3)")
		d.find(i+1, "status restarting", isStatus("restarting"))
		d.execute("import os\nos._exit(3)")
		d.find(0, "status dead", isStatus("dead"))
		for range d.k.Messages() {
		}
		if err := d.k.Err(); !errors.Is(err, sandbox.ErrKernelDead) || !strings.Contains(err.Error(), "died 2 times in a row, the last time exit status 3") {
			t.Fatalf("Err: %v", err)
		}
		assertNoProcesses(t, sb)
	})
}

// BenchmarkKernelRelayExecute measures a `1+1` execute round trip through
// the relay (Send to execute_reply and status idle), as a Jupyter client
// sees it behind the Kernel Gateway API, minus the WebSocket.
func BenchmarkKernelRelayExecute(b *testing.B) {
	sb := newComputer(b, newDriver(b), nil)
	c := openRelay(b, sb, sandbox.KernelStart{})
	c.run("1+1") // warm up
	b.ResetTimer()
	for b.Loop() {
		c.seen = c.seen[:0]
		c.run("1+1")
	}
}
