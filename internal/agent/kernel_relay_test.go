package agent

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/testbin"
)

func testKernelMessage(channel, msgType string, content string, buffers ...[]byte) protocol.KernelMessage {
	h := fmt.Sprintf(`{"msg_id": "id-%s", "msg_type": %q, "session": "s", "username": "u", "date": "", "version": "5.3"}`, msgType, msgType)
	return protocol.KernelMessage{Channel: channel, Header: json.RawMessage(h), ParentHeader: json.RawMessage(`{}`),
		Metadata: json.RawMessage(`{}`), Content: json.RawMessage(content), Buffers: buffers}
}

// reassemble feeds chunks to a fresh assembler and returns the message.
func reassemble(t *testing.T, chunks [][]byte) *protocol.KernelMessage {
	t.Helper()
	a := assembler{limit: protocol.MaxKernelMessage + 64<<10}
	for i, c := range chunks {
		if len(c) > protocol.MaxPayload {
			t.Fatalf("chunk %d of %d bytes", i, len(c))
		}
		m, err := a.add(c)
		if err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
		if (m != nil) != (i == len(chunks)-1) {
			t.Fatalf("chunk %d of %d: message %v", i, len(chunks), m != nil)
		}
		if m != nil {
			return m
		}
	}
	t.Fatal("no chunks")
	return nil
}

func TestKernelWireRoundTrip(t *testing.T) {
	big := `{"data": "` + strings.Repeat("x", 5<<20) + `"}`
	edge := `{"d": "` + strings.Repeat("y", protocol.MaxPayload-1-4-1-4-4*4-len(`{"d": ""}`)-len(testKernelMessage("iopub", "t", "{}").Header)-4) + `"}`
	for _, m := range []protocol.KernelMessage{
		testKernelMessage(protocol.ChannelShell, "execute_request", `{"code": "1+1"}`),
		testKernelMessage(protocol.ChannelIOPub, "display_data", big),
		testKernelMessage(protocol.ChannelStdin, "input_reply", `{}`, []byte{}, []byte{0, 1, 2}, bytes.Repeat([]byte{0xff}, 2<<20)),
		testKernelMessage(protocol.ChannelControl, "t", edge),
	} {
		chunks, err := encodeKernelMessage(&m)
		if err != nil {
			t.Fatal(err)
		}
		got := reassemble(t, chunks)
		if len(m.Buffers) == 0 {
			m.Buffers = nil
		}
		if !reflect.DeepEqual(*got, m) {
			t.Errorf("%s: round trip changed the message (%d chunks)", m.Channel, len(chunks))
		}
		t.Logf("%s: %d bytes in %d chunks", m.Channel, messageSize(&m), len(chunks))
	}
}

func TestKernelAssemblerRefuses(t *testing.T) {
	good, _ := encodeKernelMessage(&protocol.KernelMessage{Channel: protocol.ChannelShell, Header: json.RawMessage(`{}`), ParentHeader: json.RawMessage(`{}`), Metadata: json.RawMessage(`{}`), Content: json.RawMessage(`{}`)})
	body := good[0][5:] // without flag and length
	first := func(flag byte, total uint32, data []byte) []byte {
		return append(binary.BigEndian.AppendUint32([]byte{flag}, total), data...)
	}
	withBody := func(b []byte) [][]byte { return [][]byte{first(0, uint32(len(b)), b)} }
	cases := []struct {
		name   string
		chunks [][]byte
		want   string
	}{
		{"empty chunk", [][]byte{{}}, "empty Jupyter message chunk"},
		{"no length", [][]byte{{0, 1, 2}}, "without the message's length"},
		{"bad flags", [][]byte{{0x82, 0, 0, 0, 0}}, "flags 0x82"},
		{"4 GiB announced", [][]byte{first(chunkMore, 1<<32-1, nil)}, "a Jupyter message of 4294967295 bytes; the limit is"},
		{"longer than announced", [][]byte{first(chunkMore, 10, make([]byte, 8)), {0, 1, 2, 3}}, "longer than the announced 10 bytes"},
		{"ends early", [][]byte{first(chunkMore, 10, make([]byte, 4)), {0, 1}}, "of 10 bytes ended after 5"},
		{"more after complete", [][]byte{first(chunkMore, 4, make([]byte, 4))}, "chunk after the announced length"},
		{"channel 0", withBody(append([]byte{0}, body[1:]...)), "channel 0"},
		{"channel 9", withBody(append([]byte{9}, body[1:]...)), "channel 9"},
		{"3 parts", withBody(append([]byte{1, 0, 0, 0, 3}, body[5:]...)), "3 parts"},
		{"2000 parts", withBody(append([]byte{1, 0, 0, 7, 208}, body[5:]...)), "2000 parts"},
		{"part too long", withBody([]byte{1, 0, 0, 0, 4, 0xff, 0xff, 0xff, 0xff, '{'}), "part longer than the message"},
		{"truncated part length", withBody([]byte{1, 0, 0, 0, 4, 0, 0}), "truncated part length"},
		{"trailing bytes", withBody(append(append([]byte{}, body...), 'x')), "bytes after the last part"},
	}
	for _, tc := range cases {
		a := assembler{limit: protocol.MaxKernelMessage}
		var err error
		before := totalAllocBytes()
		for _, c := range tc.chunks {
			if _, err = a.add(c); err != nil {
				break
			}
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
		if d := totalAllocBytes() - before; d > 4<<20 {
			t.Errorf("%s: allocated %d bytes", tc.name, d)
		}
	}
}

func totalAllocBytes() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

func FuzzKernelAssembler(f *testing.F) {
	m := testKernelMessage(protocol.ChannelIOPub, "stream", `{"text": "hi"}`, []byte("buf"))
	chunks, _ := encodeKernelMessage(&m)
	f.Add(chunks[0], []byte{})
	f.Add([]byte{1, 0, 0, 0, 20, 1, 0, 0, 0}, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, a, b []byte) {
		as := assembler{limit: 1 << 16}
		for _, c := range [][]byte{a, b} {
			m, err := as.add(c)
			if err != nil {
				return
			}
			if m != nil {
				if messageSize(m) > 1<<16 || channelCode(m.Channel) == 0 {
					t.Fatalf("decoded %d bytes on %q", messageSize(m), m.Channel)
				}
			}
		}
	})
}

// openFakeRelay opens a relay against the fake agent, which answers OK.
func openFakeRelay(t *testing.T, c *Client, fa *fakeAgent) (*KernelRelay, uint32) {
	t.Helper()
	type opened struct {
		r   *KernelRelay
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		r, err := c.OpenKernel(context.Background(), sandbox.KernelStart{Cwd: "/workspace/p", Env: []string{"A=1"}})
		ch <- opened{r, err}
	}()
	f := fa.expect(protocol.KindKernelOpen)
	var ks protocol.KernelStart
	if err := json.Unmarshal(f.Payload, &ks); err != nil || ks.Cwd != "/workspace/p" || ks.Env[0] != "A=1" {
		t.Fatalf("open payload %s", f.Payload)
	}
	fa.sendJSON(protocol.KindOK, f.ID, KernelRelayState{})
	o := <-ch
	if o.err != nil {
		t.Fatal(o.err)
	}
	return o.r, f.ID
}

// sendMessage writes m's chunks as the agent would.
func (fa *fakeAgent) sendMessage(id uint32, m protocol.KernelMessage) {
	fa.t.Helper()
	chunks, err := encodeKernelMessage(&m)
	if err != nil {
		fa.t.Fatal(err)
	}
	for _, c := range chunks {
		fa.send(protocol.KindKernelMessage, id, c)
	}
}

func nextMessage(t *testing.T, r *KernelRelay) sandbox.KernelMessage {
	t.Helper()
	select {
	case m, ok := <-r.Messages():
		if !ok {
			t.Fatalf("Messages closed: %v", r.Err())
		}
		return m
	case <-time.After(5 * time.Second):
		t.Fatal("no message")
	}
	return sandbox.KernelMessage{}
}

func TestKernelRelayClient(t *testing.T) {
	base := runtime.NumGoroutine()
	c, fa := newFakeAgent(t)
	r, id := openFakeRelay(t, c, fa)

	// Kernel → host, in order, a big one among small ones.
	big := testKernelMessage(protocol.ChannelIOPub, "display_data", `{"data": "`+strings.Repeat("z", 3<<20)+`"}`)
	go func() {
		fa.sendMessage(id, testKernelMessage(protocol.ChannelIOPub, "status", `{"execution_state": "busy"}`))
		fa.sendMessage(id, big)
		fa.sendMessage(id, testKernelMessage(protocol.ChannelShell, "execute_reply", `{"status": "ok"}`, []byte("b")))
	}()
	if m := nextMessage(t, r); m.Channel != protocol.ChannelIOPub || !strings.Contains(string(m.Content), "busy") {
		t.Fatalf("first: %s %s", m.Channel, m.Content)
	}
	if m := nextMessage(t, r); len(m.Content) != len(big.Content) {
		t.Fatalf("big: %d bytes", len(m.Content))
	}
	if m := nextMessage(t, r); m.Channel != protocol.ChannelShell || string(m.Buffers[0]) != "b" {
		t.Fatalf("third: %s %q", m.Channel, m.Buffers)
	}

	// Host → kernel: 5 MB in chunks, reassembled by the agent.
	out := testKernelMessage(protocol.ChannelShell, "execute_request", `{"code": "`+strings.Repeat("c", 5<<20)+`"}`)
	sent := clientAsync(func() error { return r.Send(context.Background(), sandbox.KernelMessage(out)) })
	var chunks [][]byte
	for len(chunks) == 0 || chunks[len(chunks)-1][0]&chunkMore != 0 {
		chunks = append(chunks, fa.expect(protocol.KindKernelMessage).Payload)
	}
	if err := clientWait(t, sent, "Send"); err != nil {
		t.Fatal(err)
	}
	if got := reassemble(t, chunks); !bytes.Equal(got.Content, out.Content) || len(chunks) != 6 {
		t.Errorf("sent %d chunks; content of %d bytes", len(chunks), len(got.Content))
	}

	// Refused without a frame, and the relay goes on.
	tooBig := testKernelMessage(protocol.ChannelShell, "execute_request", `{}`, make([]byte, protocol.MaxKernelMessage))
	if err := r.Send(context.Background(), sandbox.KernelMessage(tooBig)); !errors.Is(err, sandbox.ErrInvalid) || !errors.Is(err, ErrKernelMessageTooLarge) {
		t.Errorf("oversized: %v", err)
	}
	if err := r.Send(context.Background(), sandbox.KernelMessage(testKernelMessage(protocol.ChannelIOPub, "stream", `{}`))); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("iopub: %v", err)
	}
	if err := r.Send(context.Background(), sandbox.KernelMessage(testKernelMessage(protocol.ChannelShell, "x", `null`))); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("null content: %v", err)
	}

	// Controls carry a sequence number; a stale reply is ignored.
	ctl := clientAsync(func() error { return r.Restart(context.Background()) })
	f := fa.expect(protocol.KindKernelControl)
	var kc protocol.KernelControl
	if err := json.Unmarshal(f.Payload, &kc); err != nil || kc.Action != "restart" || kc.Seq == 0 {
		t.Fatalf("control %s", f.Payload)
	}
	fa.sendJSON(protocol.KindKernelControlReply, id, protocol.KernelControlReply{Seq: kc.Seq + 7})
	fa.sendJSON(protocol.KindKernelControlReply, id, protocol.KernelControlReply{Seq: kc.Seq, Error: &protocol.WireError{Code: "kernel_dead", Message: "no luck"}})
	if err := clientWait(t, ctl, "Restart"); !errors.Is(err, sandbox.ErrKernelDead) || err.Error() != "no luck" {
		t.Errorf("Restart: %v", err)
	}
	ctl = clientAsync(func() error { return r.Interrupt(context.Background()) })
	f = fa.expect(protocol.KindKernelControl)
	_ = json.Unmarshal(f.Payload, &kc)
	fa.sendJSON(protocol.KindKernelControlReply, id, protocol.KernelControlReply{Seq: kc.Seq})
	if err := clientWait(t, ctl, "Interrupt"); err != nil || kc.Action != "interrupt" {
		t.Errorf("Interrupt: %v (%s)", err, f.Payload)
	}

	if r.Err() != nil {
		t.Fatalf("Err while running: %v", r.Err())
	}
	closed := clientAsync(func() error { return r.Close(context.Background()) })
	fa.expect(protocol.KindKernelClose)
	fa.sendJSON(protocol.KindOK, id, KernelRelayState{Closed: true})
	if err := clientWait(t, closed, "Close"); err != nil {
		t.Fatal(err)
	}
	for range r.Messages() {
	}
	if !errors.Is(r.Err(), sandbox.ErrKernelClosed) {
		t.Errorf("Err after Close: %v", r.Err())
	}
	clientPingOK(t, c, fa)
	c.Close()
	testbin.WaitGoroutines(t, base)
}

// TestKernelRelayClientBacklog: a consumer that does not read Messages
// ends its relay with sandbox.ErrKernelBacklog; the computer's other streams keep
// working throughout.
func TestKernelRelayClientBacklog(t *testing.T) {
	c, fa := newFakeAgent(t)
	r, id := openFakeRelay(t, c, fa)
	m := testKernelMessage(protocol.ChannelIOPub, "stream", `{"text": "`+strings.Repeat("x", 900<<10)+`"}`)
	flooded := make(chan struct{})
	go func() {
		defer close(flooded)
		for i := 0; i < 200; i++ { // ~180 MiB, far past the bound
			chunks, _ := encodeKernelMessage(&m)
			buf, _ := protocol.AppendFrame(nil, protocol.Frame{Kind: protocol.KindKernelMessage, ID: id, Payload: chunks[0]})
			if _, err := fa.conn.Write(buf); err != nil {
				return
			}
		}
	}()
	select {
	case <-flooded: // the read loop took everything: it never waited for the relay
	case <-time.After(2 * time.Minute): // blocked is forever; 180 MiB under -race on a loaded host took 16 s
		t.Fatal("the flood blocked the client's read loop")
	}
	fa.expect(protocol.KindKernelClose)
	clientPingOK(t, c, fa)
	fa.sendJSON(protocol.KindError, id, protocol.WireError{Code: "internal", Message: "closed"})
	n := 0
	for range r.Messages() {
		n++
	}
	if !errors.Is(r.Err(), sandbox.ErrKernelBacklog) {
		t.Fatalf("Err: %v after %d messages", r.Err(), n)
	}
	t.Logf("%d messages delivered before: %v", n, r.Err())
	if err := r.Send(context.Background(), sandbox.KernelMessage(testKernelMessage(protocol.ChannelShell, "x", `{}`))); !errors.Is(err, sandbox.ErrKernelBacklog) {
		t.Errorf("Send after the end: %v", err)
	}
	if err := r.Close(context.Background()); err != nil {
		t.Errorf("Close after the end: %v", err)
	}
}

func TestKernelRelayClientMalformedFromAgent(t *testing.T) {
	cases := []struct {
		name    string
		payload func(id uint32, fa *fakeAgent)
		want    string
	}{
		{"garbage chunk", func(id uint32, fa *fakeAgent) {
			fa.send(protocol.KindKernelMessage, id, []byte{0, 0, 0, 0, 3, 9, 9, 9})
		}, "malformed Jupyter message"},
		{"oversized", func(id uint32, fa *fakeAgent) {
			fa.send(protocol.KindKernelMessage, id, binary.BigEndian.AppendUint32([]byte{chunkMore}, 1<<31))
		}, "the limit is"},
		{"content not an object", func(id uint32, fa *fakeAgent) {
			fa.sendMessage(id, testKernelMessage(protocol.ChannelIOPub, "stream", `"text"`))
		}, "content is not a JSON object"},
		{"unknown kind", func(id uint32, fa *fakeAgent) { fa.send(protocol.KindStdout, id, []byte("x")) }, "unexpected frame kind"},
		{"second open answer", func(id uint32, fa *fakeAgent) { fa.sendJSON(protocol.KindOK, id, KernelRelayState{}) }, "a second open answer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, fa := newFakeAgent(t)
			r, id := openFakeRelay(t, c, fa)
			tc.payload(id, fa)
			fa.expect(protocol.KindKernelClose)
			fa.sendJSON(protocol.KindOK, id, KernelRelayState{Closed: true})
			for range r.Messages() {
			}
			if err := r.Err(); !errors.Is(err, protocol.ErrInternal) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Err: %v, want %q", err, tc.want)
			}
			clientPingOK(t, c, fa)
		})
	}
}

func TestKernelRelayClientOpen(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		c, fa := newFakeAgent(t)
		done := clientAsync(func() error {
			_, err := c.OpenKernel(context.Background(), sandbox.KernelStart{})
			return err
		})
		f := fa.expect(protocol.KindKernelOpen)
		fa.sendJSON(protocol.KindError, f.ID, protocol.WireError{Code: "busy", Message: "busy: a kernel relay is already open"})
		if err := clientWait(t, done, "OpenKernel"); !errors.Is(err, sandbox.ErrKernelBusy) {
			t.Errorf("OpenKernel: %v", err)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		c, fa := newFakeAgent(t)
		ctx, cancel := context.WithCancel(context.Background())
		done := clientAsync(func() error {
			_, err := c.OpenKernel(ctx, sandbox.KernelStart{})
			return err
		})
		f := fa.expect(protocol.KindKernelOpen)
		cancel()
		fa.expect(protocol.KindKernelClose)
		// The kernel had started: the open answer, then the close's.
		fa.sendJSON(protocol.KindOK, f.ID, KernelRelayState{})
		fa.sendJSON(protocol.KindOK, f.ID, KernelRelayState{Closed: true})
		if err := clientWait(t, done, "OpenKernel"); !errors.Is(err, context.Canceled) {
			t.Errorf("OpenKernel: %v", err)
		}
		clientPingOK(t, c, fa)
	})
	t.Run("agent gone", func(t *testing.T) {
		c, fa := newFakeAgent(t)
		done := clientAsync(func() error {
			_, err := c.OpenKernel(context.Background(), sandbox.KernelStart{})
			return err
		})
		fa.expect(protocol.KindKernelOpen)
		fa.conn.Close()
		if err := clientWait(t, done, "OpenKernel"); !errors.Is(err, sandbox.ErrGone) {
			t.Errorf("OpenKernel: %v", err)
		}
	})
}

func TestKernelRelayStatusMessage(t *testing.T) {
	m := statusMessage("sess", "restarting")
	if err := ValidateKernelMessage(&m); err != nil {
		t.Fatal(err)
	}
	var h map[string]string
	if err := json.Unmarshal(m.Header, &h); err != nil || h["msg_type"] != "status" || h["session"] != "sess" || h["version"] != "5.3" || len(h["msg_id"]) != 32 || h["date"] == "" || h["username"] == "" {
		t.Errorf("header %s", m.Header)
	}
	if m.Channel != protocol.ChannelIOPub || string(m.Content) != `{"execution_state":"restarting"}` || string(m.ParentHeader) != "{}" || string(m.Metadata) != "{}" {
		t.Errorf("message %+v", m)
	}
}

func TestBoundedQueue(t *testing.T) {
	q := newBoundedQueue[int](100)
	for i := range 10 {
		if !q.push(i, 10) {
			t.Fatalf("push %d refused", i)
		}
	}
	if q.push(10, 1) {
		t.Fatal("push past the limit accepted")
	}
	for i := range 1000 { // a queue that never empties does not grow
		v, ok, _ := q.pop()
		if !ok || v != i {
			t.Fatalf("pop %d: %d %v", i, v, ok)
		}
		q.push(i+10, 10)
	}
	if len(q.items) > 600 {
		t.Errorf("queue array of %d for 10 items", len(q.items))
	}
	q.close(false)
	if q.push(1, 1) {
		t.Error("push after close accepted")
	}
	n := 0
	for {
		_, ok, done := q.pop()
		if done {
			break
		}
		if !ok {
			t.Fatal("not done, nothing to pop, after close")
		}
		n++
	}
	if n != 10 {
		t.Errorf("%d items after close, want 10", n)
	}
}

// A relayed flood of tiny messages (Jupyter clients get every message: the
// relay never coalesces) is bounded by the backlog all the same: each
// message counts queuedOverhead besides its bytes.
func TestKernelRelayClientBacklogOfTinyMessages(t *testing.T) {
	c, fa := newFakeAgent(t)
	r, id := openFakeRelay(t, c, fa)
	m := testKernelMessage(protocol.ChannelIOPub, "stream", `{"name":"stdout","text":"x"}`)
	chunks, _ := encodeKernelMessage(&m)
	frame, _ := protocol.AppendFrame(nil, protocol.Frame{Kind: protocol.KindKernelMessage, ID: id, Payload: chunks[0]})
	limit := maxHostBacklog / (int64(len(chunks[0])) + queuedOverhead)
	go func() {
		for i := int64(0); i < 2*limit; i++ {
			if _, err := fa.conn.Write(frame); err != nil {
				return
			}
		}
	}()
	fa.expect(protocol.KindKernelClose)
	fa.sendJSON(protocol.KindError, id, protocol.WireError{Code: "internal", Message: "closed"})
	n := int64(0)
	for range r.Messages() {
		n++
	}
	if !errors.Is(r.Err(), sandbox.ErrKernelBacklog) || n > limit {
		t.Fatalf("Err %v after %d messages; the bound is %d", r.Err(), n, limit)
	}
}

// TestRelayBacklogIsABacklogOnTheHost: the agent's own backlog limit (the
// host did not take the kernel's messages fast enough) reaches the host as
// sandbox.ErrKernelBacklog, like the host's limit: under load either side
// can fill first, and a client sees the same kind either way.
func TestRelayBacklogIsABacklogOnTheHost(t *testing.T) {
	err := fromWire(protocol.ToWire(errBacklog))
	if !errors.Is(err, sandbox.ErrKernelBacklog) || !strings.Contains(err.Error(), "did not take the kernel's messages fast enough") {
		t.Fatalf("the agent's backlog on the host: %v", err)
	}
}
