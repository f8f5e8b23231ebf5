package jupyter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// TestChannelsRouting: with two connections to one kernel, iopub reaches
// both, a reply only the connection that asked; an input() round trip
// works over stdin; the model counts connections and tracks the state.
func TestChannelsRouting(t *testing.T) {
	e := newFakeEnv(t, Config{})
	k := startKernel(t, e.url, e.key, nil)
	a := dialChannels(t, e.url, e.key, k.ID)
	b := dialChannels(t, e.url, e.key, k.ID)
	eventually(t, 5*time.Second, "two connections", func() bool {
		var m model
		json.Unmarshal(e.do("GET", "/api/kernels/"+k.ID, nil).body, &m)
		return m.Connections == 2
	})

	id := a.send("shell", "execute_request", map[string]any{"code": "1+1"}, "")
	reply, seenA := a.until("execute_reply", id)
	if reply.Channel != "shell" || reply.MsgType != "execute_reply" || reply.MsgID != reply.Header.MsgID || reply.MsgID == "" {
		t.Fatalf("reply %+v", reply)
	}
	_, seenB := b.until("status", id) // busy
	for {
		m, err := b.read(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		seenB = append(seenB, m)
		if m.Header.MsgType == "status" && strings.Contains(string(m.Content), "idle") {
			break
		}
	}
	var resultA, resultB bool
	for _, m := range seenA {
		resultA = resultA || m.Header.MsgType == "execute_result"
	}
	for _, m := range seenB {
		resultB = resultB || m.Header.MsgType == "execute_result"
		if m.Channel != "iopub" {
			t.Fatalf("connection b got %s %s of a's request", m.Channel, m.Header.MsgType)
		}
	}
	if !resultA || !resultB {
		t.Fatalf("execute_result reached a: %v, b: %v", resultA, resultB)
	}

	// input(): the request goes to b alone, b's reply reaches the kernel.
	id = b.send("shell", "execute_request", map[string]any{"code": "input:name?", "allow_stdin": true}, "")
	req, _ := b.until("input_request", id)
	if req.Channel != "stdin" || !strings.Contains(string(req.Content), "name?") {
		t.Fatalf("input_request %+v", req)
	}
	b.send("stdin", "input_reply", map[string]any{"value": "ann"}, req.Header.MsgID)
	_, seen := b.until("execute_reply", id)
	found := false
	for _, m := range seen {
		found = found || (m.Header.MsgType == "stream" && strings.Contains(string(m.Content), "got ann"))
	}
	if !found {
		t.Fatal("the input reply did not reach the kernel")
	}
	for {
		m, err := a.read(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if m.Channel == "stdin" || m.Header.MsgType == "execute_reply" {
			t.Fatalf("connection a got b's %s", m.Header.MsgType)
		}
		if m.Header.MsgType == "status" && m.ParentHeader.MsgID == id && strings.Contains(string(m.Content), "idle") {
			break
		}
	}

	// execution_state follows iopub status.
	a.send("shell", "execute_request", map[string]any{"code": "sleep"}, "")
	eventually(t, 5*time.Second, "state busy", func() bool {
		var m model
		json.Unmarshal(e.do("GET", "/api/kernels/"+k.ID, nil).body, &m)
		return m.ExecutionState == "busy"
	})
	eventually(t, 5*time.Second, "state idle", func() bool {
		var m model
		json.Unmarshal(e.do("GET", "/api/kernels/"+k.ID, nil).body, &m)
		return m.ExecutionState == "idle"
	})
}

// TestChannelsBinary: messages with buffers travel as jupyter_server's
// binary frames, both ways.
func TestChannelsBinary(t *testing.T) {
	e := newFakeEnv(t, Config{})
	k := startKernel(t, e.url, e.key, nil)
	a := dialChannels(t, e.url, e.key, k.ID)
	id := a.send("shell", "execute_request", map[string]any{"code": "buffers"}, "")
	_, seen := a.until("execute_reply", id)
	var disp *wsMsg
	for i := range seen {
		if seen[i].Header.MsgType == "display_data" {
			disp = &seen[i]
		}
	}
	if disp == nil || !disp.binary || len(disp.Buffers) != 2 || !bytes.Equal(disp.Buffers[0], []byte{0, 1, 2}) || string(disp.Buffers[1]) != "xyz" {
		t.Fatalf("display_data with buffers: %+v", disp)
	}

	// A client's binary frame: a comm_msg with two buffers, echoed back.
	jsonPart := []byte(`{"channel":"shell","header":{"msg_id":"bin-1","msg_type":"comm_msg","session":"s"},"parent_header":{},"metadata":{},"content":{"comm_id":"c"}}`)
	frame := joinBinary(jsonPart, [][]byte{[]byte("hello"), {9, 9}})
	if err := a.c.Write(t.Context(), websocket.MessageBinary, frame); err != nil {
		t.Fatal(err)
	}
	echo, _ := a.until("comm_msg", "bin-1")
	if !echo.binary || len(echo.Buffers) != 2 || string(echo.Buffers[0]) != "hello" || !bytes.Equal(echo.Buffers[1], []byte{9, 9}) {
		t.Fatalf("echo %+v", echo)
	}
}

// TestChannelsSlowClient: a connection that stops reading is closed with a
// reason once its queue is full; another one gets every message.
func TestChannelsSlowClient(t *testing.T) {
	e := newFakeEnv(t, Config{})
	k := startKernel(t, e.url, e.key, nil)
	e.srv.queueBytes.Store(1 << 30) // room for the whole flood: this test is not about timing
	fast := dialChannels(t, e.url, e.key, k.ID)
	e.srv.queueBytes.Store(256 << 10)
	slow := dialChannels(t, e.url, e.key, k.ID)
	const n = 800
	id := fast.send("shell", "execute_request", map[string]any{"code": "flood 800 32768"}, "")
	_, seen := fast.until("execute_reply", id)
	streams := 0
	for _, m := range seen {
		if m.Header.MsgType == "stream" {
			streams++
		}
	}
	if streams != n {
		t.Fatalf("the reading connection got %d of %d stream messages", streams, n)
	}
	var err error
	for err == nil {
		_, err = slow.read(10 * time.Second)
	}
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.StatusPolicyViolation || !strings.Contains(ce.Reason, "too slow") {
		t.Fatalf("the slow connection ended with %v, want a policy-violation close saying why", err)
	}
}

// TestChannelsAuth: ?token= opens the WebSocket; without a key it is 401;
// another organisation's kernel is 404.
func TestChannelsAuth(t *testing.T) {
	e := newFakeEnv(t, Config{})
	k := startKernel(t, e.url, e.key, nil)
	u := "ws" + strings.TrimPrefix(e.url, "http") + "/api/kernels/" + k.ID + "/channels"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, u+"?token="+e.key, nil)
	if err != nil {
		t.Fatalf("?token=: %v", err)
	}
	c.CloseNow()
	if _, res, err := websocket.Dial(ctx, u, nil); err == nil || res == nil || res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no key: %v %v", err, res)
	}
	other := e.newKey(true, mustCaps())
	if _, res, err := websocket.Dial(ctx, u+"?token="+other, nil); err == nil || res == nil || res.StatusCode != http.StatusNotFound {
		t.Fatalf("another org: %v %v", err, res)
	}
}

// TestChannelsKernelDeleted: deleting a kernel closes its connections with
// a reason.
func TestChannelsKernelDeleted(t *testing.T) {
	e := newFakeEnv(t, Config{})
	k := startKernel(t, e.url, e.key, nil)
	a := dialChannels(t, e.url, e.key, k.ID)
	if r := e.do("DELETE", "/api/kernels/"+k.ID, nil); r.code != http.StatusNoContent {
		t.Fatal(r)
	}
	var err error
	for err == nil {
		_, err = a.read(5 * time.Second)
	}
	if websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Fatalf("connection ended with %v", err)
	}
}

// TestChannelsLimit: a kernel takes at most maxConns connections, also
// when they come at once (the count was checked before the upgrade and
// not again: 34 to 52 of 320 concurrent upgrades got in).
func TestChannelsLimit(t *testing.T) {
	e := newFakeEnv(t, Config{})
	k := startKernel(t, e.url, e.key, nil)
	u := "ws" + strings.TrimPrefix(e.url, "http") + "/api/kernels/" + k.ID + "/channels?token=" + e.key
	const tries = 10 * maxConns
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for range tries {
		wg.Go(func() {
			ws, res, err := websocket.Dial(t.Context(), u, nil)
			code := 0
			if res != nil {
				code = res.StatusCode
			}
			if err == nil {
				t.Cleanup(func() { ws.CloseNow() })
			}
			mu.Lock()
			codes[code]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if codes[http.StatusSwitchingProtocols] != maxConns || codes[http.StatusTooManyRequests] != tries-maxConns {
		t.Fatalf("%d upgrades at once: %v, want %d connected and the rest 429", tries, codes, maxConns)
	}
	eventually(t, 5*time.Second, "all connections attached", func() bool {
		var m model
		json.Unmarshal(e.do("GET", "/api/kernels/"+k.ID, nil).body, &m)
		return m.Connections == maxConns
	})
	if _, res, err := websocket.Dial(t.Context(), u, nil); err == nil || res == nil || res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("connection %d: %v %v", maxConns+1, err, res)
	}
}

// TestChannelsMalformedKernelMessages: what a kernel sends that cannot be
// encoded for clients (a numeric msg_id) is dropped and counted, and the
// connection goes on with the next message.
func TestChannelsMalformedKernelMessages(t *testing.T) {
	e := newFakeEnv(t, Config{})
	k := startKernel(t, e.url, e.key, nil)
	a := dialChannels(t, e.url, e.key, k.ID)
	eventually(t, 5*time.Second, "the connection", func() bool {
		var m model
		json.Unmarshal(e.do("GET", "/api/kernels/"+k.ID, nil).body, &m)
		return m.Connections == 1
	})
	fk := e.drv.last().kernel
	for range 3 {
		fk.mu.Lock()
		fk.msgs <- sandbox.KernelMessage{Channel: "iopub", Header: json.RawMessage(`{"msg_id":7,"msg_type":"stream"}`),
			ParentHeader: json.RawMessage("{}"), Metadata: json.RawMessage("{}"), Content: json.RawMessage(`{}`)}
		fk.mu.Unlock()
	}
	fk.emit("iopub", "stream", json.RawMessage("{}"), map[string]any{"name": "stdout", "text": "after"})
	m, err := a.read(5 * time.Second)
	if err != nil || m.MsgType != "stream" {
		t.Fatalf("first message after the malformed ones: %+v, %v", m, err)
	}
	e.srv.mu.Lock()
	got := e.srv.kernels[k.ID].malformed.Load()
	e.srv.mu.Unlock()
	if got != 3 {
		t.Fatalf("malformed count %d, want 3", got)
	}
}
