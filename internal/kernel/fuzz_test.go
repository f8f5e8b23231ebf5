package kernel

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// memConn is a net.Conn reading from a byte slice and discarding writes.
type memConn struct{ r io.Reader }

func (m memConn) Read(p []byte) (int, error)       { return m.r.Read(p) }
func (m memConn) Write(p []byte) (int, error)      { return len(p), nil }
func (m memConn) Close() error                     { return nil }
func (m memConn) LocalAddr() net.Addr              { return nil }
func (m memConn) RemoteAddr() net.Addr             { return nil }
func (m memConn) SetDeadline(time.Time) error      { return nil }
func (m memConn) SetReadDeadline(time.Time) error  { return nil }
func (m memConn) SetWriteDeadline(time.Time) error { return nil }

var fuzzLimits = limits{maxFrame: 1 << 16, maxFrames: 16, maxMsg: 1 << 17, stall: time.Second}

func newMemZconn(data []byte) *zconn {
	z := &zconn{name: "fuzz", conn: memConn{bytes.NewReader(data)}, lim: fuzzLimits, wtimeout: time.Second}
	z.fr = frameReader{r: bufio.NewReaderSize(deadlineReader{z}, 4096), socket: "fuzz", lim: fuzzLimits, arm: z.arm}
	return z
}

func checkMessages(t *testing.T, z *zconn) {
	for i := 0; i < 10000; i++ {
		frames, err := z.readMessage()
		if err != nil {
			var pe *ProtocolError
			if !errors.As(err, &pe) && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("unexpected error type %T: %v", err, err)
			}
			return
		}
		if len(frames) == 0 || len(frames) > fuzzLimits.maxFrames {
			t.Fatalf("%d frames", len(frames))
		}
		total := 0
		for _, f := range frames {
			if len(f) > int(fuzzLimits.maxFrame) {
				t.Fatalf("frame of %d bytes", len(f))
			}
			total += len(f)
		}
		if total > int(fuzzLimits.maxMsg) {
			t.Fatalf("message of %d bytes", total)
		}
	}
}

// FuzzFrameDecoder feeds arbitrary bytes to the frame decoder after the
// handshake.
func FuzzFrameDecoder(f *testing.F) {
	f.Add(appendFrames(nil, [][]byte{[]byte("a"), bytes.Repeat([]byte("b"), 300)}))
	f.Add(longFrameHeader(0, 1<<62))
	f.Add(longFrameHeader(flagMore, 1<<16+1))
	f.Add(append(appendCommand(nil, "PING", []byte{0, 1, 'x'}), 0, 1, 'y'))
	f.Add(appendCommand(nil, "ERROR", []byte{2, 'n', 'o'}))
	f.Add([]byte{flagCommand, 1, 0xff})
	f.Add([]byte{0x80, 0})
	f.Add(bytes.Repeat([]byte{flagMore, 0}, 20))
	f.Add([]byte{flagMore, 1, 'a', flagCommand, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		checkMessages(t, newMemZconn(data))
	})
}

// FuzzHandshake feeds arbitrary bytes as the kernel's side of the handshake
// and what follows.
func FuzzHandshake(f *testing.F) {
	f.Add(appendFrames(serverHello("ROUTER"), [][]byte{[]byte("x")}))
	f.Add(serverHello("PUB"))
	f.Add(appendCommand(greeting(), "READY", []byte{11, 'S', 'o', 'c', 'k', 'e', 't', '-', 'T', 'y', 'p', 'e', 0xFF, 0xFF, 0xFF, 0xFF}))
	f.Add(appendCommand(greeting(), "ERROR", []byte{200}))
	f.Add(greeting()[:30])
	f.Fuzz(func(t *testing.T, data []byte) {
		conn := memConn{bytes.NewReader(data)}
		z, err := handshake(context.Background(), conn, "fuzz", "DEALER", []byte("id"), fuzzLimits, time.Second)
		if err != nil {
			return
		}
		checkMessages(t, z)
	})
}

// splitFrames turns fuzz input into frames: each frame is a length byte and
// that many bytes.
func splitFrames(data []byte) [][]byte {
	var frames [][]byte
	for len(data) > 0 && len(frames) < 64 {
		n := min(int(data[0]), len(data)-1)
		frames = append(frames, data[1:1+n])
		data = data[1+n:]
	}
	return frames
}

func joinFrames(frames [][]byte) []byte {
	var b []byte
	for _, f := range frames {
		b = append(b, byte(len(f)))
		b = append(b, f...)
	}
	return b
}

// FuzzParseMessage feeds arbitrary frames to the Jupyter message parser and
// whatever parses (unsigned) to the output collector.
func FuzzParseMessage(f *testing.F) {
	s := &signer{key: []byte("k"), session: "s", username: "u"}
	for _, m := range []struct {
		typ     string
		content any
	}{
		{"stream", map[string]string{"name": "stdout", "text": "hi"}},
		{"display_data", map[string]any{"data": map[string]any{"text/html": "<table><tr><td>1</td></tr></table>", "image/png": "iVBORw0KGgo="}}},
		{"execute_result", map[string]any{"data": map[string]any{"text/plain": []string{"a"}}, "execution_count": 1}},
		{"error", map[string]any{"ename": "E", "evalue": "\x1b[31mv", "traceback": []string{"\x1b[0mt"}}},
		{"clear_output", map[string]any{"wait": true}},
		{"update_display_data", map[string]any{"data": map[string]any{"text/plain": "u"}, "transient": map[string]string{"display_id": "d"}}},
	} {
		h := s.header("id", m.typ)
		h.Date = "" // keep seeds short
		frames, _ := s.encode([][]byte{[]byte("topic")}, h, nil, m.content)
		f.Add(joinFrames(frames))
	}
	f.Add([]byte("\x09<IDS|MSG>\x00\x02{}\x02{}\x02{}\x02{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		frames := splitFrames(data)
		if m, err := parseMessage(frames, newVerifier([]byte("k"))); err == nil {
			// A success with the key means the signature really matched.
			d := 0
			for string(frames[d]) != delimiter {
				d++
			}
			sig := newVerifier([]byte("k")).sign(frames[d+2], frames[d+3], frames[d+4], frames[d+5])
			var want [32]byte
			if n, _ := hex.Decode(want[:], frames[d+1]); len(frames[d+1]) != 64 || n != 32 || !bytes.Equal(want[:], sig) {
				t.Fatalf("accepted a bad signature: %+v", m)
			}
		}
		m, err := parseMessage(frames, newVerifier(nil))
		if err != nil {
			if !errors.Is(err, errMalformed) {
				t.Fatalf("unsigned parse: %v", err)
			}
			return
		}
		c := newCollector(256, 1<<10)
		for range 3 {
			if err := c.handle(m); err != nil && !errors.Is(err, errMalformed) {
				t.Fatal(err)
			}
		}
		var size int64
		for _, o := range c.outputs() {
			if o.Type != OutTruncated && o.Type != OutClear && o.Type != OutError {
				size += o.size()
			}
		}
		if size > 256 {
			t.Fatalf("outputs of %d bytes over a 256-byte cap", size)
		}
		if _, err := json.Marshal(c.outputs()); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzHTMLToMarkdown checks that the converter terminates without panicking
// and does not blow up its input beyond the table-span bound.
func FuzzHTMLToMarkdown(f *testing.F) {
	f.Add("<table><thead><tr><th colspan=2>a</th></tr></thead><tr><td rowspan=3>b</td><td>c</td></tr></table>")
	f.Add("<ul><li>x<ol><li>y</ul>")
	f.Add("<pre>a<b>c</pre><script>x")
	f.Add("<!-- x <a href='>'>&amp;&#x27;&bogus;")
	f.Add("<table><tr><td><table><tr><td>in")
	f.Fuzz(func(t *testing.T, s string) {
		out := HTMLToMarkdown(s)
		if len(out) > 64*len(s)+16*maxTableCells {
			t.Fatalf("%d bytes out of %d", len(out), len(s))
		}
	})
}
