package kernel

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/testbin"
)

// fakePeer is a raw TCP server (not ipykernel) that speaks as much ZMTP as
// a test wants and then misbehaves.
type fakePeer struct {
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
}

func newFakePeer(t *testing.T, behave func(conn net.Conn)) *fakePeer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &fakePeer{ln: ln}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			p.conns = append(p.conns, conn)
			p.mu.Unlock()
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				behave(conn)
				// Hold the connection open (a stalling peer) until stop.
				_, _ = io.Copy(io.Discard, conn)
			}()
		}
	}()
	t.Cleanup(p.stop)
	return p
}

func (p *fakePeer) port() int { return p.ln.Addr().(*net.TCPAddr).Port }

func (p *fakePeer) stop() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// serverHello is a valid greeting and READY from a socket of type typ.
func serverHello(typ string) []byte {
	return appendCommand(greeting(), "READY", appendProperty(nil, "Socket-Type", []byte(typ)))
}

// readHello consumes the client's greeting and READY.
func readHello(conn net.Conn) error {
	buf := make([]byte, greetingSize+2)
	if _, err := io.ReadFull(conn, buf); err != nil {
		return err
	}
	rest := make([]byte, buf[greetingSize+1])
	_, err := io.ReadFull(conn, rest)
	return err
}

func longFrameHeader(flags byte, n uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{flags | flagLong}, n)
}

func totalAlloc() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

// TestZMTPHostilePeer drives one connection against peers that break the
// protocol in every way we know; each must end in a prompt, descriptive
// error, without panicking or allocating what was announced.
func TestZMTPHostilePeer(t *testing.T) {
	// hello returns the server's greeting and READY followed by parts (a
	// fresh slice each time: cases must not share a backing array).
	hello := func(parts ...[]byte) []byte {
		b := serverHello("ROUTER")
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	cases := []struct {
		name string
		send []byte // after reading the client's hello (nil: do not read it)
		lim  func(*limits)
		want string
		read bool // the handshake succeeds; the error comes from readMessage
		hang bool // hang up after sending (else hold the connection open)
	}{
		{name: "2^62 frame", send: hello(longFrameHeader(0, 1<<62)), read: true,
			want: "kernel sent a frame of 4611686018427387904 bytes; the limit is 67108864"},
		{name: "max uint64 frame", send: hello(longFrameHeader(flagMore, ^uint64(0))), read: true,
			want: "kernel sent a frame of 18446744073709551615 bytes"},
		{name: "1 GiB frame", send: hello(longFrameHeader(0, 1<<30)), read: true,
			want: "kernel sent a frame of 1073741824 bytes; the limit is 67108864"},
		{name: "huge command", send: hello(longFrameHeader(flagCommand, 1<<40)), read: true,
			want: "kernel sent a command of 1099511627776 bytes; the limit is 65536"},
		{name: "malformed command body", send: hello([]byte{flagCommand, 2, 0xFF, 'P'}), read: true,
			want: "malformed command"},
		{name: "empty command", send: hello([]byte{flagCommand, 0}), read: true, want: "malformed command"},
		{name: "malformed PING", send: hello(appendCommand(nil, "PING", []byte{1})), read: true, want: "malformed PING"},
		{name: "ERROR command", send: hello(appendCommand(nil, "ERROR", append([]byte{3}, "bye"...))), read: true,
			want: "kernel closed the connection: bye"},
		{name: "command with MORE", send: hello([]byte{flagCommand | flagMore, 5, 4, 'P', 'I', 'N', 'G'}), read: true,
			want: "command frame with the MORE flag"},
		{name: "command inside a message", send: hello([]byte{flagMore, 1, 'a'}, appendCommand(nil, "PING", []byte{0, 0})), read: true,
			want: "command inside a multipart message"},
		{name: "reserved flags", send: hello([]byte{0x80, 1, 'x'}), read: true, want: "invalid flags 0x80"},
		{name: "too many frames", send: hello(bytes.Repeat([]byte{flagMore, 0}, 2000)), read: true,
			want: "more than 1024 frames"},
		{name: "message too large", lim: func(l *limits) { l.maxMsg = 1000 }, read: true,
			send: hello(longFrameHeader(flagMore, 600), make([]byte, 600), longFrameHeader(0, 600)),
			want: "message of more than 1000 bytes"},
		{name: "truncated frame", send: hello([]byte{0, 200, 'x'}), read: true, hang: true, want: "truncated frame: unexpected EOF"},
		{name: "stall mid-frame", send: hello(longFrameHeader(0, 60<<20), make([]byte, 10)), read: true,
			want: "stalled in the middle of a message"},
		{name: "stall mid-message", send: hello([]byte{flagMore, 1, 'x'}), read: true, want: "stalled in the middle of a message"},
		{name: "bad greeting", send: make([]byte, 64), want: "did not send a ZMTP greeting"},
		{name: "ZMTP 2", send: func() []byte { g := greeting(); g[10] = 1; return g }(), want: "ZMTP 1.0; 3.0 or later is required"},
		{name: "CURVE", send: func() []byte { g := greeting(); copy(g[12:32], "CURVE\x00"); return g }(), want: `security mechanism "CURVE"`},
		{name: "stall in greeting", send: greeting()[:10], want: "did not complete the ZMTP handshake in time"},
		{name: "no READY", send: append(greeting(), 0, 1, 'x'), want: "message before READY"},
		{name: "ERROR instead of READY", send: appendCommand(greeting(), "ERROR", append([]byte{6}, "denied"...)), want: "refused the connection: denied"},
		{name: "other command", send: appendCommand(greeting(), "HELLO", nil), want: `"HELLO" instead of READY`},
		{name: "malformed READY", send: appendCommand(greeting(), "READY", []byte{11, 'S', 'o', 'c', 'k', 'e', 't', '-', 'T', 'y', 'p', 'e', 0xFF, 0xFF, 0xFF, 0xFF, 'R'}),
			want: "announces 4294967295 bytes"},
		{name: "truncated property", send: appendCommand(greeting(), "READY", []byte{200, 'S'}), want: "malformed READY property"},
		{name: "wrong socket type", send: serverHello("PUB"), want: `socket type "PUB" cannot talk to DEALER`},
		{name: "huge READY", send: append(greeting(), longFrameHeader(flagCommand, 1<<62)...), want: "command of 4611686018427387904 bytes"},
	}
	base := runtime.NumGoroutine()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newFakePeer(t, func(conn net.Conn) {
				if err := readHello(conn); err != nil {
					return
				}
				_, _ = conn.Write(tc.send)
				if tc.hang {
					conn.Close()
				}
			})
			defer p.stop()
			lim := limits{maxFrame: 64 << 20, maxFrames: 1024, maxMsg: 64 << 20, stall: 300 * time.Millisecond}
			if tc.lim != nil {
				tc.lim(&lim)
			}
			before := totalAlloc()
			start := time.Now()
			conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", p.port()))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			z, err := handshake(ctx, conn, "shell", "DEALER", []byte("id"), lim, time.Second)
			if tc.read {
				if err != nil {
					t.Fatalf("handshake: %v", err)
				}
				for err == nil {
					_, err = z.readMessage()
				}
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if el := time.Since(start); el > 2*time.Second {
				t.Errorf("took %v", el)
			}
			if d := totalAlloc() - before; d > 8<<20 {
				t.Errorf("allocated %d bytes", d)
			}
			t.Logf("%v (%v)", err, time.Since(start).Round(time.Millisecond))
		})
	}
	testbin.WaitGoroutines(t, base)
}

func TestZMTPPingAndSubscribe(t *testing.T) {
	got := make(chan []byte, 1)
	p := newFakePeer(t, func(conn net.Conn) {
		if readHello(conn) != nil {
			return
		}
		msg := append(serverHello("ROUTER"), appendCommand(nil, "PING", []byte{0, 10, 'c', 't', 'x'})...)
		msg = appendFrames(msg, [][]byte{[]byte("a"), bytes.Repeat([]byte("b"), 300)})
		_, _ = conn.Write(msg)
		pong := make([]byte, 2+1+4+3)
		if _, err := io.ReadFull(conn, pong); err == nil {
			got <- pong
		}
	})
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", p.port()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	lim := limits{maxFrame: 1 << 20, maxFrames: 8, maxMsg: 1 << 20, stall: time.Second}
	z, err := handshake(context.Background(), conn, "shell", "DEALER", []byte("id"), lim, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	frames, err := z.readMessage()
	if err != nil || len(frames) != 2 || string(frames[0]) != "a" || len(frames[1]) != 300 {
		t.Fatalf("readMessage: %q %v", frames, err)
	}
	select {
	case pong := <-got:
		if want := appendCommand(nil, "PONG", []byte("ctx")); !bytes.Equal(pong, want) {
			t.Errorf("pong %q, want %q", pong, want)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("no PONG")
	}
}

// fakeKernel serves the four sockets Connect dials; shell misbehaves.
func fakeKernel(t *testing.T, shell func(conn net.Conn)) ConnInfo {
	polite := func(typ string) func(net.Conn) {
		return func(conn net.Conn) {
			if readHello(conn) == nil {
				_, _ = conn.Write(serverHello(typ))
			}
		}
	}
	ci := ConnInfo{IP: "127.0.0.1", Transport: "tcp", Key: "k", SignatureScheme: "hmac-sha256"}
	ci.ShellPort = newFakePeer(t, shell).port()
	ci.IOPubPort = newFakePeer(t, polite("PUB")).port()
	ci.StdinPort = newFakePeer(t, polite("ROUTER")).port()
	ci.ControlPort = newFakePeer(t, polite("ROUTER")).port()
	return ci
}

func TestConnectHostileKernel(t *testing.T) {
	cases := []struct {
		name  string
		shell func(conn net.Conn)
		want  string
	}{
		{"2^62 frame", func(conn net.Conn) {
			if readHello(conn) == nil {
				_, _ = conn.Write(append(serverHello("ROUTER"), longFrameHeader(0, 1<<62)...))
			}
		}, "kernel sent a frame of 4611686018427387904 bytes; the limit is 67108864 (kernel shell socket)"},
		{"stall mid-frame", func(conn net.Conn) {
			if readHello(conn) == nil {
				msg := append(serverHello("ROUTER"), longFrameHeader(0, 50<<20)...)
				_, _ = conn.Write(append(msg, make([]byte, 1<<20)...))
			}
		}, "stalled in the middle of a message"},
		{"garbage instead of greeting", func(conn net.Conn) {
			_, _ = conn.Write(bytes.Repeat([]byte("HTTP/1.1 400 Bad Request\r\n"), 10))
		}, "did not send a ZMTP greeting"},
		{"silent", func(conn net.Conn) {}, "handshake"},
		{"never answers kernel_info", func(conn net.Conn) {
			if readHello(conn) == nil {
				_, _ = conn.Write(serverHello("ROUTER"))
			}
		}, "no kernel_info reply"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := runtime.NumGoroutine()
			ci := fakeKernel(t, tc.shell)
			// fakeKernel's peers are running now; count them in the base.
			time.Sleep(20 * time.Millisecond)
			base = runtime.NumGoroutine()
			before := totalAlloc()
			// The stall bound is long enough for a loaded host to finish
			// the handshake (300 ms was not, under -race beside other
			// packages), short enough to keep the test quick.
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			start := time.Now()
			c, err := Connect(ctx, ci, Options{StallTimeout: time.Second})
			if err == nil {
				c.Close()
				t.Fatal("Connect succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want %q", err, tc.want)
			}
			if el := time.Since(start); el > 4*time.Second {
				t.Errorf("Connect took %v", el)
			}
			if d := totalAlloc() - before; d > 16<<20 {
				t.Errorf("allocated %d MiB", d>>20)
			}
			t.Logf("%v (%v)", err, time.Since(start).Round(time.Millisecond))
			testbin.WaitGoroutines(t, base)
		})
	}
}

// TestHostileKernelCell runs code in a real ipykernel that attacks its own
// sockets: forged and garbage messages through pyzmq (dropped and counted,
// the session goes on), then a raw frame header announcing 2^62 bytes
// written straight into the TCP connection of its iopub socket (the session
// ends with a protocol error; the process does not notice).
func TestHostileKernelCell(t *testing.T) {
	base := runtime.NumGoroutine()
	k := launchKernel(t, "tcp")
	defer k.stop()
	c := k.connect(t, Options{})
	defer c.Close()

	forge := `
import json, hmac, hashlib, uuid, base64
k = get_ipython().kernel
sock, key = k.iopub_socket, k.session.key
parent = k.get_parent("shell")["header"]
def signed(msg_type, content, header_pad=None):
    h = {"msg_id": uuid.uuid4().hex, "msg_type": msg_type, "session": "evil", "username": "evil", "date": "", "version": "5.3"}
    if header_pad:
        h["pad"] = "x" * header_pad
    c = content if isinstance(content, bytes) else json.dumps(content).encode()
    parts = [json.dumps(h).encode(), json.dumps(parent, default=str).encode(), b"{}", c]
    sig = hmac.new(key, b"".join(parts), hashlib.sha256).hexdigest().encode()
    return [b"evil", b"<IDS|MSG>", sig] + parts
good = signed("stream", {"name": "stdout", "text": "forged but signed\n"})
msgs = [
    [b"garbage"],
    [b"<IDS|MSG>"],
    [b"<IDS|MSG>", b"0" * 64, b"{}", b"{}", b"{}", b"{}"],
    [b"<IDS|MSG>", b"zz" * 32] + good[3:],
    [b"<IDS|MSG>", b"short"] + good[3:],
    good[:2] + [good[2][:-1] + (b"1" if good[2].endswith(b"0") else b"0")] + good[3:],
    signed("stream", {"name": "stdout", "text": 5}),
    signed("stream", b"{not json"),
    signed("stream", b"[" * 200000 + b"]" * 200000),
    signed("stream", {"text": "x"}, header_pad=200000),
    signed("error", {"ename": 1}),
    signed("status", {"execution_state": 7}),
    signed("display_data", {"data": {"image/png": "!!!notbase64", "text/plain": "bad png"}}),
    signed("display_data", {"data": {"image/png": base64.b64encode(b"not a png at all").decode(), "text/plain": "fake png"}}),
    signed("display_data", {"data": None}),
    signed("execute_result", {"data": {"text/plain": ["list", " form"]}, "execution_count": "nan"}),
    good,
]
for m in msgs:
    sock.send_multipart(m)
import time; time.sleep(0.2)
print("survived")
`
	r := run(t, c, forge)
	if r.Error != nil {
		t.Fatalf("forging cell failed: %s", strings.Join(r.Error.Traceback, "\n"))
	}
	if err := c.Err(); err != nil {
		t.Fatalf("session ended: %v", err)
	}
	if got := streamText(r, "stdout"); got != "forged but signed\nsurvived\n" {
		t.Errorf("stdout %q; outputs %v", got, summarize(r.Outputs))
	}
	var badPNG, fakePNG bool
	for _, o := range outputsOf(r, OutDisplay) {
		badPNG = badPNG || o.Text == "bad png" && slicesHasPrefix(o.Omitted, "image/png (invalid base64)")
		fakePNG = fakePNG || o.Text == "fake png" && slicesHasPrefix(o.Omitted, "image/png (not a PNG")
	}
	if !badPNG || !fakePNG {
		t.Errorf("invalid images not reported: %+v", outputsOf(r, OutDisplay))
	}
	st := c.Stats()
	t.Logf("stats %+v", st)
	if st.BadSignatures < 4 || st.Malformed < 8 {
		t.Errorf("stats %+v: want >= 4 bad signatures, >= 8 malformed", st)
	}
	if r := run(t, c, "1+1"); outputsOf(r, OutResult)[0].Text != "2" {
		t.Fatalf("after forged messages: %v", summarize(r.Outputs))
	}

	fatal := `
import os, socket, struct, time
time.sleep(0.3)  # let iopub go quiet
` +
		testbin.ForgeHugeFrame(fmt.Sprint(k.ci.IOPubPort)) + `time.sleep(1)
print("wrote", n)
`
	before := totalAlloc()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	r, err := c.Execute(ctx, fatal, nil)
	if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), "kernel sent a frame of 4611686018427387904 bytes; the limit is 67108864 (kernel iopub socket)") {
		t.Fatalf("Execute: %v (result %+v)", err, r)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("took %v", el)
	}
	if d := totalAlloc() - before; d > 16<<20 {
		t.Errorf("allocated %d MiB", d>>20)
	}
	if !errors.Is(c.Err(), ErrProtocol) {
		t.Errorf("Err() = %v", c.Err())
	}
	if _, err := c.Execute(ctx, "1+1", nil); !errors.Is(err, ErrProtocol) {
		t.Errorf("Execute after the session ended: %v", err)
	}
	t.Logf("session ended: %v", err)
	c.Close()
	k.stop()
	testbin.WaitGoroutines(t, base)
}

func slicesHasPrefix(list []string, prefix string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}
