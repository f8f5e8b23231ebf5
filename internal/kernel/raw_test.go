package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/testbin"
)

// rawSink collects what a raw-mode Client delivers; find looks at
// everything delivered so far (channels race), then waits for more.
type rawSink struct {
	ch   chan RawMessage
	seen []RawMessage
}

func (s *rawSink) find(t *testing.T, match func(RawMessage) bool) RawMessage {
	t.Helper()
	for _, m := range s.seen {
		if match(m) {
			return m
		}
	}
	timeout := time.After(10 * time.Second)
	for {
		select {
		case m := <-s.ch:
			s.seen = append(s.seen, m)
			if match(m) {
				return m
			}
		case <-timeout:
			t.Fatal("no matching message within 10 s")
		}
	}
}

func msgType(m RawMessage) string {
	var h Header
	_ = json.Unmarshal(m.Header, &h)
	return h.MsgType
}

func parentID(m RawMessage) string {
	var h Header
	_ = json.Unmarshal(m.ParentHeader, &h)
	return h.MsgID
}

// clientMsg is a message as a Jupyter client would write it.
func clientMsg(channel, id, msgType string, parent json.RawMessage, content any) RawMessage {
	h, _ := json.Marshal(Header{MsgID: id, MsgType: msgType, Session: "client-session", Username: "u", Date: "2026-01-01T00:00:00.000000Z", Version: "5.3"})
	c, _ := json.Marshal(content)
	if parent == nil {
		parent = json.RawMessage("{}")
	}
	return RawMessage{Channel: channel, Header: h, ParentHeader: parent, Metadata: json.RawMessage(`{"m":1}`), Content: c}
}

// executeRequest is an execute_request with every field ipykernel requires.
func executeRequest(id, code string) RawMessage {
	return clientMsg("shell", id, "execute_request", nil, map[string]any{
		"code": code, "silent": false, "store_history": true, "user_expressions": map[string]any{}, "allow_stdin": true, "stop_on_error": true})
}

func startRaw(t *testing.T) (*testKernel, *Client, *rawSink) {
	t.Helper()
	k := launchKernel(t, "tcp")
	t.Cleanup(k.stop)
	sink := &rawSink{ch: make(chan RawMessage, 1024)}
	c := k.connect(t, Options{OnMessage: func(m RawMessage) { sink.ch <- m }})
	t.Cleanup(func() { c.Close() })
	return k, c, sink
}

// TestRawRelay drives a real ipykernel as a Jupyter client would: an
// execute_request and its replies, and input() answered over stdin (which
// must carry shell's identity to reach the kernel).
func TestRawRelay(t *testing.T) {
	_, c, sink := startRaw(t)
	if err := c.SendRaw(executeRequest("exec-1", "1+1")); err != nil {
		t.Fatal(err)
	}
	reply := sink.find(t, func(m RawMessage) bool { return m.Channel == "shell" && parentID(m) == "exec-1" })
	if msgType(reply) != "execute_reply" || !strings.Contains(string(reply.Content), `"status": "ok"`) {
		t.Fatalf("reply %s %s", reply.Header, reply.Content)
	}
	// The client's header comes back as the reply's parent.
	if !strings.Contains(string(reply.ParentHeader), "client-session") {
		t.Errorf("parent header %s", reply.ParentHeader)
	}
	res := sink.find(t, func(m RawMessage) bool { return m.Channel == "iopub" && msgType(m) == "execute_result" })
	if parentID(res) != "exec-1" || !strings.Contains(string(res.Content), `"text/plain": "2"`) {
		t.Errorf("execute_result %s %s", res.ParentHeader, res.Content)
	}
	sink.find(t, func(m RawMessage) bool {
		return m.Channel == "iopub" && msgType(m) == "status" && parentID(m) == "exec-1" && strings.Contains(string(m.Content), "idle")
	})

	if err := c.SendRaw(executeRequest("exec-2", "v = input('x'); print('got', v)")); err != nil {
		t.Fatal(err)
	}
	in := sink.find(t, func(m RawMessage) bool { return m.Channel == "stdin" })
	if msgType(in) != "input_request" || parentID(in) != "exec-2" {
		t.Fatalf("stdin: %s %s", in.Header, in.ParentHeader)
	}
	if err := c.SendRaw(clientMsg("stdin", "in-1", "input_reply", in.Header, map[string]string{"value": "hello"})); err != nil {
		t.Fatal(err)
	}
	out := sink.find(t, func(m RawMessage) bool { return m.Channel == "iopub" && msgType(m) == "stream" })
	if !strings.Contains(string(out.Content), "got hello") {
		t.Errorf("stream %s", out.Content)
	}
	if st := c.Stats(); st.InputRequests != 0 {
		t.Errorf("raw mode answered input itself: %+v", st)
	}
	// The Client's own requests still work and are not delivered.
	if _, err := c.KernelInfo(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestRawSendRefusesInvalidMessages(t *testing.T) {
	_, c, _ := startRaw(t)
	good := clientMsg("shell", "x", "kernel_info_request", nil, map[string]any{})
	cases := []struct {
		name string
		edit func(*RawMessage)
		want string
	}{
		{"iopub", func(m *RawMessage) { m.Channel = "iopub" }, `cannot send on channel "iopub"`},
		{"unknown channel", func(m *RawMessage) { m.Channel = "hb" }, `cannot send on channel "hb"`},
		{"content array", func(m *RawMessage) { m.Content = json.RawMessage(`[1]`) }, "content is not a JSON object"},
		{"metadata invalid", func(m *RawMessage) { m.Metadata = json.RawMessage(`{"a":`) }, "metadata is not a JSON object"},
		{"parent null", func(m *RawMessage) { m.ParentHeader = json.RawMessage(`null`) }, "parent_header is not a JSON object"},
		{"no msg_id", func(m *RawMessage) { m.Header = json.RawMessage(`{"msg_type":"x"}`) }, "msg_id and msg_type"},
		{"numeric msg_type", func(m *RawMessage) { m.Header = json.RawMessage(`{"msg_id":"a","msg_type":3}`) }, "msg_id and msg_type"},
		{"too large", func(m *RawMessage) { m.Buffers = [][]byte{make([]byte, 64<<20)} }, "the limit is 67108864"},
	}
	for _, tc := range cases {
		m := good
		tc.edit(&m)
		err := c.SendRaw(m)
		if !errors.Is(err, ErrInvalidMessage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	if err := c.Err(); err != nil {
		t.Fatalf("refused messages ended the client: %v", err)
	}
}

// TestRawHostileKernel: unauthenticated garbage is dropped; a signed
// message whose parts are not JSON objects, or a forged 2^62-byte frame,
// ends the session with a protocol error and nothing else.
func TestRawHostileKernel(t *testing.T) {
	base := runtime.NumGoroutine()
	forge := func(content string) string {
		return fmt.Sprintf(`
import json, hmac, hashlib, uuid
k = get_ipython().kernel
sock, key = k.iopub_socket, k.session.key
h = json.dumps({"msg_id": uuid.uuid4().hex, "msg_type": "stream", "session": "e", "username": "e", "date": "", "version": "5.3"}).encode()
parts = [h, b"{}", b"{}", %s]
sig = hmac.new(key, b"".join(parts), hashlib.sha256).hexdigest().encode()
sock.send_multipart([b"<IDS|MSG>", b"0" * 64] + parts)  # bad signature: dropped
sock.send_multipart([b"garbage"])                        # not a message: dropped
sock.send_multipart([b"<IDS|MSG>", sig] + parts)
`, content)
	}
	for _, tc := range []struct{ name, code, want string }{
		{"signed array content", forge(`b"[1, 2]"`), "kernel sent a signed message that is not a valid Jupyter message: invalid Jupyter message: content is not a JSON object (kernel iopub socket)"},
		{"signed invalid JSON", forge(`b"{nope"`), "content is not a JSON object (kernel iopub socket)"},
		{"huge frame", "\nimport os, socket, struct\n" + testbin.ForgeHugeFrame("k_port"), "kernel sent a frame of 4611686018427387904 bytes; the limit is 67108864 (kernel iopub socket)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, c, sink := startRaw(t)
			code := strings.ReplaceAll(tc.code, "k_port", fmt.Sprint(k.ci.IOPubPort))
			if err := c.SendRaw(executeRequest("evil", code)); err != nil {
				t.Fatal(err)
			}
			select {
			case <-c.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("session did not end")
			}
			if err := c.Err(); !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Err() = %v, want %q", err, tc.want)
			}
			for len(sink.ch) > 0 {
				if m := <-sink.ch; strings.Contains(string(m.Header), `"session": "e"`) {
					t.Errorf("forged message delivered: %s", m.Content)
				}
			}
			if st := c.Stats(); tc.name != "huge frame" && (st.BadSignatures < 1 || st.Malformed < 1) {
				t.Errorf("stats %+v: the unauthenticated messages were not dropped and counted", st)
			}
		})
	}
	testbin.WaitGoroutines(t, base)
}
