package agent

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// fakeAgent is the agent's end of a control channel, driven by a test: it
// records the client's frames and writes whatever the test wants, garbage
// included.
type fakeAgent struct {
	t      *testing.T
	conn   net.Conn
	frames chan protocol.Frame
}

func newFakeAgent(t *testing.T) (*Client, *fakeAgent) {
	t.Helper()
	hostEnd, agentEnd := net.Pipe()
	fa := &fakeAgent{t: t, conn: agentEnd, frames: make(chan protocol.Frame, 4096)}
	go func() {
		defer close(fa.frames)
		for {
			f, err := protocol.ReadFrame(agentEnd)
			if err != nil {
				return
			}
			fa.frames <- f
		}
	}()
	c := NewClient(hostEnd)
	t.Cleanup(func() {
		c.Close()
		agentEnd.Close()
	})
	return c, fa
}

// expect waits for the client's next frame and checks its kind.
func (fa *fakeAgent) expect(kind protocol.Kind) protocol.Frame {
	fa.t.Helper()
	select {
	case f, ok := <-fa.frames:
		if !ok {
			fa.t.Fatalf("channel closed while waiting for a frame of kind %d", kind)
		}
		if f.Kind != kind {
			fa.t.Fatalf("client sent kind %d, want %d", f.Kind, kind)
		}
		return f
	case <-time.After(30 * time.Second):
		fa.t.Fatalf("no frame of kind %d from the client", kind)
	}
	return protocol.Frame{}
}

// send writes one frame; it must not fail.
func (fa *fakeAgent) send(kind protocol.Kind, id uint32, payload []byte) {
	fa.t.Helper()
	buf, err := protocol.AppendFrame(nil, protocol.Frame{Kind: kind, ID: id, Payload: payload})
	if err != nil {
		fa.t.Fatal(err)
	}
	if _, err := fa.conn.Write(buf); err != nil {
		fa.t.Fatalf("write frame: %v", err)
	}
}

func (fa *fakeAgent) sendJSON(kind protocol.Kind, id uint32, v any) {
	fa.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		fa.t.Fatal(err)
	}
	fa.send(kind, id, b)
}

// clientAsync runs fn in a goroutine and returns its error on a channel.
func clientAsync(fn func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- fn() }()
	return ch
}

func clientWait(t *testing.T, ch <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(5 * time.Second):
		t.Fatalf("%s did not return", what)
	}
	return nil
}

// clientPingOK checks that the client still works end to end.
func clientPingOK(t *testing.T, c *Client, fa *fakeAgent) {
	t.Helper()
	done := clientAsync(func() error { return c.Ping(context.Background()) })
	f := fa.expect(protocol.KindPing)
	fa.send(protocol.KindOK, f.ID, []byte(`{}`))
	if err := clientWait(t, done, "Ping"); err != nil {
		t.Fatalf("Ping after garbage: %v", err)
	}
}

func TestClientDropsFramesForUnknownStreams(t *testing.T) {
	c, fa := newFakeAgent(t)
	done := clientAsync(func() error { return c.Ping(context.Background()) })
	f := fa.expect(protocol.KindPing)
	// Frames for streams nobody opened, of every kind, some huge-but-legal.
	for _, id := range []uint32{0, f.ID + 1, f.ID + 1000, 0xffffffff} {
		for _, k := range []protocol.Kind{protocol.KindOK, protocol.KindError, protocol.KindExit, protocol.KindStdout, protocol.KindData, protocol.KindDataEnd, protocol.Kind(0), protocol.Kind(255)} {
			fa.send(k, id, []byte(`{"code":"not_found","message":"bogus"}`))
		}
		fa.send(protocol.KindStdout, id, make([]byte, protocol.MaxPayload))
	}
	select {
	case err := <-done:
		t.Fatalf("Ping returned %v before its own reply arrived", err)
	case <-time.After(50 * time.Millisecond):
	}
	fa.send(protocol.KindOK, f.ID, []byte(`{}`))
	if err := clientWait(t, done, "Ping"); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	// A late reply to a finished request is dropped too.
	fa.send(protocol.KindError, f.ID, []byte(`{"code":"internal","message":"late"}`))
	clientPingOK(t, c, fa)
}

func TestClientRejectsUnknownKinds(t *testing.T) {
	c, fa := newFakeAgent(t)
	for _, k := range []protocol.Kind{protocol.Kind(0), protocol.KindStdout, protocol.KindData, protocol.KindPing, protocol.Kind(200), protocol.Kind(255)} {
		done := clientAsync(func() error { return c.Ping(context.Background()) })
		f := fa.expect(protocol.KindPing)
		fa.send(k, f.ID, []byte("garbage"))
		err := clientWait(t, done, "Ping")
		if !errors.Is(err, protocol.ErrInternal) {
			t.Errorf("reply of kind %d: err = %v, want ErrInternal", k, err)
		}
	}
	clientPingOK(t, c, fa)
}

func TestClientMalformedReplies(t *testing.T) {
	c, fa := newFakeAgent(t)
	long := strings.Repeat("x", 10000)
	cases := []struct {
		kind    protocol.Kind
		payload string
		want    error
	}{
		{protocol.KindError, `{not json`, protocol.ErrInternal},
		{protocol.KindError, ``, protocol.ErrInternal},
		{protocol.KindError, `[1,2,3]`, protocol.ErrInternal},
		{protocol.KindError, `{"code":"no_such_code","message":"hm"}`, protocol.ErrInternal},
		{protocol.KindError, `{"code":"not_found","message":"` + long + `"}`, protocol.ErrNotFound},
		{protocol.KindError, `{"code":"path_escape"}`, protocol.ErrPathEscape},
		{protocol.KindOK, `{"name": 12}`, protocol.ErrInternal}, // wrong types in a Stat reply
		{protocol.KindOK, `{"name":`, protocol.ErrInternal},
	}
	for _, tc := range cases {
		done := clientAsync(func() error {
			_, err := c.Stat(context.Background(), "x")
			return err
		})
		f := fa.expect(protocol.KindStat)
		fa.send(tc.kind, f.ID, []byte(tc.payload))
		err := clientWait(t, done, "Stat")
		if !errors.Is(err, tc.want) {
			t.Errorf("kind %d %.40q: err = %v, want %v", tc.kind, tc.payload, err, tc.want)
		}
		if err != nil && len(err.Error()) > 1100 {
			t.Errorf("kind %d: the agent's message was not bounded: %d bytes", tc.kind, len(err.Error()))
		}
	}
	clientPingOK(t, c, fa)
}

func TestClientExecMalformedFrames(t *testing.T) {
	c, fa := newFakeAgent(t)
	cases := []struct {
		name   string
		frames []protocol.Frame
		want   error
	}{
		{"exit not json", []protocol.Frame{{Kind: protocol.KindExit, Payload: []byte("\x00\xff")}}, protocol.ErrInternal},
		{"exit wrong types", []protocol.Frame{{Kind: protocol.KindExit, Payload: []byte(`{"exit_code":"zero"}`)}}, protocol.ErrInternal},
		{"error not json", []protocol.Frame{{Kind: protocol.KindError, Payload: []byte(`{"code":`)}}, protocol.ErrInternal},
		{"unknown kind", []protocol.Frame{{Kind: protocol.Kind(222), Payload: []byte("?")}}, protocol.ErrInternal},
		{"data in a process stream", []protocol.Frame{{Kind: protocol.KindData, Payload: []byte("?")}}, protocol.ErrInternal},
		{"ok in a process stream", []protocol.Frame{{Kind: protocol.KindOK, Payload: []byte(`{}`)}}, nil},
		{"error", []protocol.Frame{{Kind: protocol.KindError, Payload: []byte(`{"code":"proc_limit","message":"full"}`)}}, protocol.ErrProcLimit},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			parent := fa.t
			fa.t = t
			defer func() { fa.t = parent }()
			var stdout bytes.Buffer
			startedCalls := 0
			done := clientAsync(func() error {
				_, err := c.Exec(context.Background(), sandbox.ExecRequest{Argv: []string{"x"}}, sandbox.ExecIO{
					Stdout:  &stdout,
					Started: func(int) { startedCalls++ },
				})
				return err
			})
			f := fa.expect(protocol.KindExec)
			fa.send(protocol.KindStarted, f.ID, []byte(`{"pid": "not a number"`)) // malformed: ignored
			fa.send(protocol.KindStdout, f.ID, []byte("out"))
			for _, fr := range tc.frames {
				fa.send(fr.Kind, f.ID, fr.Payload)
			}
			err := clientWait(t, done, "Exec")
			if tc.want == nil {
				// KindOK is not a process frame, but a well-formed one
				// must at least not crash; any outcome but a hang is fine.
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if stdout.String() != "out" {
				t.Errorf("stdout = %q, want %q", stdout.String(), "out")
			}
			if startedCalls != 0 {
				t.Errorf("Started called %d times for a malformed Started frame", startedCalls)
			}
		})
	}
	clientPingOK(t, c, fa)
}

func TestClientReadFileMoreThanAsked(t *testing.T) {
	c, fa := newFakeAgent(t)
	var got bytes.Buffer
	done := clientAsync(func() error {
		_, err := c.ReadFile(context.Background(), sandbox.FileRead{Path: "f", Limit: 10}, &got)
		return err
	})
	f := fa.expect(protocol.KindFileRead)
	fa.send(protocol.KindData, f.ID, []byte("0123456789"))
	fa.send(protocol.KindData, f.ID, []byte("overflow"))
	err := clientWait(t, done, "ReadFile")
	if !errors.Is(err, protocol.ErrInternal) {
		t.Fatalf("err = %v, want ErrInternal", err)
	}
	if got.Len() > 10 {
		t.Errorf("%d bytes reached the writer, more than the limit", got.Len())
	}
	clientPingOK(t, c, fa)
}

func TestClientHugeFrameHeaderEndsTheChannel(t *testing.T) {
	c, fa := newFakeAgent(t)
	ping := clientAsync(func() error { return c.Ping(context.Background()) })
	fa.expect(protocol.KindPing)
	exec := clientAsync(func() error {
		_, err := c.Exec(context.Background(), sandbox.ExecRequest{Argv: []string{"sleep", "100"}}, sandbox.ExecIO{})
		return err
	})
	e := fa.expect(protocol.KindExec)
	start := time.Now()
	// A header announcing 2 GiB, followed by nothing: the client must
	// neither allocate it nor wait for it.
	hdr := append(binary.BigEndian.AppendUint32(nil, 1<<31), byte(protocol.KindStdout))
	if _, err := fa.conn.Write(binary.BigEndian.AppendUint32(hdr, e.ID)); err != nil {
		t.Fatal(err)
	}
	for name, ch := range map[string]<-chan error{"Ping": ping, "Exec": exec} {
		err := clientWait(t, ch, name)
		if !errors.Is(err, sandbox.ErrGone) {
			t.Errorf("%s: err = %v, want sandbox.ErrGone", name, err)
		}
		if err != nil && !strings.Contains(err.Error(), "too large") {
			t.Errorf("%s: error %q does not say why the channel ended", name, err)
		}
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("pending requests took %v to fail", d)
	}
	select {
	case <-c.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("Done not closed after a fatal frame")
	}
	// Later requests fail at once instead of hanging.
	if err := clientWait(t, clientAsync(func() error { return c.Ping(context.Background()) }), "Ping after close"); !errors.Is(err, sandbox.ErrGone) {
		t.Errorf("Ping after close: %v, want sandbox.ErrGone", err)
	}
}

func TestClientTruncatedFrameEndsTheChannel(t *testing.T) {
	c, fa := newFakeAgent(t)
	ping := clientAsync(func() error { return c.Ping(context.Background()) })
	f := fa.expect(protocol.KindPing)
	full, _ := protocol.AppendFrame(nil, protocol.Frame{Kind: protocol.KindOK, ID: f.ID, Payload: []byte(`{"padding":"xxxxxxxx"}`)})
	fa.conn.Write(full[:len(full)-5])
	fa.conn.Close()
	err := clientWait(t, ping, "Ping")
	if !errors.Is(err, sandbox.ErrGone) {
		t.Fatalf("err = %v, want sandbox.ErrGone", err)
	}
}

// A request that gave up (here: Exec failing on a frame of an unknown kind)
// must not leave the client's reader stuck delivering more frames of that
// stream to a queue nobody reads any more: every other request of the
// computer would hang with it, and Close would not even end them. The
// reader races the abandoning request, so this repeats the scenario.
func TestClientAbandonedStreamDoesNotWedgeOthers(t *testing.T) {
	c, fa := newFakeAgent(t)
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; i < 2000 && time.Now().Before(deadline); i++ {
		exec := clientAsync(func() error {
			_, err := c.Exec(context.Background(), sandbox.ExecRequest{Argv: []string{"x"}}, sandbox.ExecIO{})
			return err
		})
		e := fa.expect(protocol.KindExec)
		go func() {
			// A bad frame, then a flood for the same stream, in one write.
			buf, _ := protocol.AppendFrame(nil, protocol.Frame{Kind: protocol.Kind(222), ID: e.ID})
			for j := 0; j < 40; j++ {
				buf, _ = protocol.AppendFrame(buf, protocol.Frame{Kind: protocol.KindStdout, ID: e.ID, Payload: []byte("more")})
			}
			fa.conn.Write(buf)
		}()
		if err := clientWait(t, exec, "Exec"); !errors.Is(err, protocol.ErrInternal) {
			t.Fatalf("iteration %d: Exec: err = %v, want ErrInternal", i, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		ping := clientAsync(func() error { return c.Ping(ctx) })
		p := fa.expect(protocol.KindPing)
		go func() {
			b, _ := protocol.AppendFrame(nil, protocol.Frame{Kind: protocol.KindOK, ID: p.ID, Payload: []byte(`{}`)})
			fa.conn.Write(b)
		}()
		err := clientWait(t, ping, "Ping")
		cancel()
		if err != nil {
			t.Errorf("iteration %d: Ping after an abandoned stream: %v (the client's reader is wedged)", i, err)
			c.Close()
			select {
			case <-c.Done():
			case <-time.After(2 * time.Second):
				t.Error("and Done is not closed 2 s after Close: the reader goroutine is stuck for good")
			}
			return
		}
	}
}

func TestClientStdinWindow(t *testing.T) {
	c, fa := newFakeAgent(t)
	stdin := bytes.NewReader(bytes.Repeat([]byte("s"), 64*protocol.ChunkSize))
	exec := clientAsync(func() error {
		st, err := c.Exec(context.Background(), sandbox.ExecRequest{Argv: []string{"cat"}}, sandbox.ExecIO{Stdin: stdin})
		if err == nil && st.ExitCode != 3 {
			t.Errorf("exit code %d, want 3", st.ExitCode)
		}
		return err
	})
	e := fa.expect(protocol.KindExec)
	var req protocol.ExecStart
	if err := json.Unmarshal(e.Payload, &req); err != nil || !req.Stdin {
		t.Fatalf("exec request %s: stdin not announced (%v)", e.Payload, err)
	}
	// next waits up to d for one more stdin chunk.
	next := func(d time.Duration) bool {
		select {
		case f := <-fa.frames:
			if f.Kind != protocol.KindStdin || f.ID != e.ID || len(f.Payload) == 0 || len(f.Payload) > protocol.ChunkSize {
				t.Fatalf("unexpected frame kind %d id %d len %d", f.Kind, f.ID, len(f.Payload))
			}
			return true
		case <-time.After(d):
			return false
		}
	}
	for i := 0; i < stdinWindow; i++ {
		if !next(5 * time.Second) {
			t.Fatalf("only %d stdin chunks arrived, want the window of %d", i, stdinWindow)
		}
	}
	if next(300 * time.Millisecond) {
		t.Fatalf("client sent more than %d unacknowledged stdin chunks", stdinWindow)
	}
	for i := 0; i < 3; i++ {
		fa.send(protocol.KindStdinAck, e.ID, nil)
	}
	for i := 0; i < 3; i++ {
		if !next(5 * time.Second) {
			t.Fatalf("after 3 acks only %d chunks arrived", i)
		}
	}
	if next(300 * time.Millisecond) {
		t.Fatal("3 acks let more than 3 chunks through")
	}
	fa.sendJSON(protocol.KindExit, e.ID, protocol.ExitStatus{ExitCode: 3})
	if err := clientWait(t, exec, "Exec"); err != nil {
		t.Fatal(err)
	}
}

func TestClientContextCancelSendsKill(t *testing.T) {
	c, fa := newFakeAgent(t)
	ctx, cancel := context.WithCancel(context.Background())
	exec := clientAsync(func() error {
		_, err := c.Exec(ctx, sandbox.ExecRequest{Argv: []string{"sleep", "100"}}, sandbox.ExecIO{})
		return err
	})
	e := fa.expect(protocol.KindExec)
	cancel()
	sig := fa.expect(protocol.KindSignal)
	var req protocol.SignalRequest
	if json.Unmarshal(sig.Payload, &req) != nil || req.Signal != 9 || sig.ID != e.ID {
		t.Fatalf("signal frame %s for id %d, want SIGKILL for %d", sig.Payload, sig.ID, e.ID)
	}
	// Exec waits for the agent to confirm the end.
	select {
	case err := <-exec:
		t.Fatalf("Exec returned %v before the process ended", err)
	case <-time.After(50 * time.Millisecond):
	}
	fa.sendJSON(protocol.KindExit, e.ID, protocol.ExitStatus{ExitCode: -1, Signal: 9})
	if err := clientWait(t, exec, "Exec"); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}
