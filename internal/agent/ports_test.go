package agent_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// echoServer is a python TCP server that echoes each connection's bytes
// until EOF, then closes (a half-close round trip).
const echoServer = `
import socket, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", %d)); s.listen(16)
def serve(c):
    while True:
        b = c.recv(65536)
        if not b: break
        c.sendall(b)
    c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
`

// waitListening polls ListPorts until port listens.
func waitListening(t *testing.T, ports sandbox.Ports, port int) sandbox.Listener {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(20 * time.Second)
	for {
		l, err := ports.ListPorts(ctx)
		if err != nil {
			t.Fatalf("ListPorts: %v", err)
		}
		for _, p := range l.Ports {
			if p.Port == port {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("port %d never listened: %+v", port, l)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestPortRelay(t *testing.T) {
	sb, _ := realComputer(t)
	ports := sb.(sandbox.Ports)
	ctx := context.Background()
	for _, start := range []sandbox.ProcessStart{
		{Argv: []string{"/usr/bin/python3", "-c", fmt.Sprintf(echoServer, 9000)}},
		{Argv: []string{"/usr/bin/python3", "-m", "http.server", "--bind", "0.0.0.0", "8000"}, Cwd: "/workspace"},
	} {
		if _, err := sb.StartProcess(ctx, start); err != nil {
			t.Fatalf("start %v: %v", start.Argv, err)
		}
	}
	if _, err := sb.WriteFile(ctx, sandbox.FileWrite{Path: "/workspace/hello.txt", Mode: 0o644}, strings.NewReader("hello, port\n")); err != nil {
		t.Fatal(err)
	}
	l := waitListening(t, ports, 9000)
	if l.Address != "127.0.0.1" || l.Family != "tcp" {
		t.Errorf("listener 9000 = %+v, want 127.0.0.1/tcp", l)
	}
	l = waitListening(t, ports, 8000)
	if l.Address != "0.0.0.0" {
		t.Errorf("listener 8000 = %+v, want 0.0.0.0", l)
	}

	t.Run("echo", func(t *testing.T) {
		// Many windows each way: the relay's flow control must let
		// everything through, in order, and the half-close must reach the
		// server so that it closes back.
		c, err := ports.DialPort(ctx, 9000)
		if err != nil {
			t.Fatalf("DialPort: %v", err)
		}
		defer c.Close()
		want := make([]byte, 8<<20)
		rand.Read(want)
		go func() {
			c.Write(want)
			c.(interface{ CloseWrite() error }).CloseWrite()
		}()
		c.SetReadDeadline(time.Now().Add(60 * time.Second))
		got, err := io.ReadAll(c)
		if err != nil {
			t.Fatalf("read echo: %v (after %d bytes)", err, len(got))
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("echo returned %d bytes, not the %d sent", len(got), len(want))
		}
	})

	t.Run("http", func(t *testing.T) {
		tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return ports.DialPort(ctx, 8000)
		}}
		defer tr.CloseIdleConnections()
		res, err := (&http.Client{Transport: tr}).Get("http://127.0.0.1:8000/hello.txt")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || string(b) != "hello, port\n" {
			t.Fatalf("GET hello.txt: %d %q", res.StatusCode, b)
		}
	})

	t.Run("refused", func(t *testing.T) {
		_, err := ports.DialPort(ctx, 8001)
		if !errors.Is(err, sandbox.ErrPortRefused) {
			t.Fatalf("DialPort of a port nothing listens on: %v, want ErrPortRefused", err)
		}
	})

	t.Run("host loopback unreachable", func(t *testing.T) {
		// A server on the host's 127.0.0.1: the agent dials the
		// computer's own loopback, where nothing listens on that port.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Write([]byte("host secret"))
				c.Close()
			}
		}()
		port := ln.Addr().(*net.TCPAddr).Port
		c, err := ports.DialPort(ctx, port)
		if err == nil {
			b, _ := io.ReadAll(c)
			c.Close()
			t.Fatalf("DialPort reached port %d of the host: read %q", port, b)
		}
		if !errors.Is(err, sandbox.ErrPortRefused) {
			t.Fatalf("DialPort of the host's port: %v, want ErrPortRefused", err)
		}
	})

	t.Run("drop", func(t *testing.T) {
		// Close without reading: the agent drops the socket, and new
		// connections still work.
		for range 20 {
			c, err := ports.DialPort(ctx, 9000)
			if err != nil {
				t.Fatal(err)
			}
			c.Write(make([]byte, 1<<20))
			c.Close()
		}
		c, err := ports.DialPort(ctx, 9000)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write([]byte("ping"))
		buf := make([]byte, 4)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
			t.Fatalf("echo after drops: %q %v", buf, err)
		}
	})
}
