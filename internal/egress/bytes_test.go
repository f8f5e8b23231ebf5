package egress_test

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/egress"
	"github.com/cubicle-sandbox/cubicle/internal/egress/egresstest"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// bytesPy opens one connection of each kind from inside the computer and
// prints, per connection, "<kind> <bytes sent> <bytes received>" as its
// own socket counted them (everything written; everything read until the
// server's end): plain HTTP and TLS, each direct and through the proxy
// (plain http:// in absolute form, and CONNECT), and a raw echo both ways.
// For the proxy, what the computer exchanges with the proxy itself (the
// CONNECT exchange, the request line and proxy headers it rewrites) is
// not what goes to the server: the script prints what reaches the server.
var bytesPy = `
import base64, os, socket, ssl, sys
GW = "` + sandbox.Nameserver + `"
ECHO = "` + egresstest.Echo.String() + `"
cred = base64.b64encode(os.environ["HTTP_PROXY"].split("//")[1].split("@")[0].encode()).decode()
BODY = b"b" * 1000

def drain(s):
    n = 0
    while True:
        d = s.recv(65536)
        if not d:
            return n
        n += len(d)

def proxied(target):
    s = socket.create_connection((GW, 3128), timeout=10)
    s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n" % (target, target, cred)).encode())
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        head += s.recv(1)
    assert b" 200 " in head, head
    return s

def echo(s, kind):
    data = b"e" * 100000
    s.sendall(data)
    s.shutdown(socket.SHUT_WR)
    print(kind, len(data), drain(s))
    s.close()

def tls(s, kind, host):
    ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    o = ctx.wrap_bio(inc, out, server_hostname=host)
    c = {"sent": 0, "recv": 0}
    def flush():
        d = out.read()
        if d:
            s.sendall(d); c["sent"] += len(d)
    def fill():
        d = s.recv(65536)
        if not d:
            inc.write_eof(); return False
        c["recv"] += len(d); inc.write(d); return True
    while True:
        try:
            o.do_handshake(); break
        except ssl.SSLWantReadError:
            flush(); fill()
    flush()
    o.write(("GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % host).encode()); flush()
    body = b""
    while True:
        try:
            d = o.read(65536)
            if not d:
                break
            body += d
        except ssl.SSLWantReadError:
            flush()
            if not fill():
                break
        except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
            break
    assert b"200 OK" in body, body
    flush()
    s.shutdown(socket.SHUT_WR)
    c["recv"] += drain(s)
    print(kind, c["sent"], c["recv"])
    s.close()

# Plain HTTP, direct.
s = socket.create_connection(("allowed.test", 80), timeout=10)
req = b"POST / HTTP/1.1\r\nHost: allowed.test\r\nX-Test: bytes\r\nContent-Length: 1000\r\nConnection: close\r\n\r\n" + BODY
s.sendall(req)
print("tcp-http", len(req), drain(s))
s.close()

# Plain HTTP through the proxy: the proxy sends the request on in origin
# form, without Proxy-* headers, with Connection: close.
s = socket.create_connection((GW, 3128), timeout=10)
s.sendall(b"POST http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nX-Test: bytes\r\nProxy-Authorization: Basic " + cred.encode() +
          b"\r\nProxy-Connection: keep-alive\r\nContent-Length: 1000\r\n\r\n" + BODY)
upstream = b"POST / HTTP/1.1\r\nHost: allowed.test\r\nX-Test: bytes\r\nContent-Length: 1000\r\nConnection: close\r\n\r\n" + BODY
print("proxy-http", len(upstream), drain(s))
s.close()

# A request without a body through the proxy goes on without one.
s = socket.create_connection((GW, 3128), timeout=10)
s.sendall(b"POST http://sub.wild.test/ HTTP/1.1\r\nHost: sub.wild.test\r\nProxy-Authorization: Basic " + cred.encode() + b"\r\nContent-Length: 0\r\n\r\n")
upstream = b"POST / HTTP/1.1\r\nHost: sub.wild.test\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
print("proxy-empty", len(upstream), drain(s))
s.close()

echo(socket.create_connection((ECHO, 7), timeout=10), "tcp-echo")
echo(proxied(ECHO + ":7"), "proxy-echo")
tls(socket.create_connection(("spliced.test", 443), timeout=10), "tcp-tls", "spliced.test")
tls(proxied("spliced.test:443"), "proxy-tls", "spliced.test")
`

// TestByteCounts (issue 13): an egress record counts the bytes each way
// exactly as the computer's own socket saw them go to and come from the
// server, for direct connections and through the proxy, plain HTTP, TLS
// and raw TCP alike (the proxy's plain HTTP once counted 0 bytes sent),
// with and without the organisation's byte rate.
func TestByteCounts(t *testing.T) {
	t.Run("no rate", func(t *testing.T) { byteCounts(t, nil) })
	t.Run("byte rate", func(t *testing.T) {
		byteCounts(t, func(c *egress.Config) { c.Limiter = egress.NewRateLimits(0, 0, 64<<20) })
	})
}

func byteCounts(t *testing.T, tweak func(*egress.Config)) {
	w := newWorld(t, tweak)
	sb := w.computer(t, sandbox.InternetPolicy{
		Domains: []string{"allowed.test", "*.wild.test", "spliced.test"},
		CIDRs:   []netip.Prefix{netip.MustParsePrefix("203.0.113.7/32")},
	})
	r := run(t, sb, python, "-c", bytesPy)
	if r.ExitCode != 0 {
		t.Fatalf("exit %d: %s %s", r.ExitCode, r.out, r.err)
	}
	web, echo, secure := netip.AddrPortFrom(egresstest.Web, 80), netip.AddrPortFrom(egresstest.Echo, 7), netip.AddrPortFrom(egresstest.Secure, 443)
	want := map[string]struct {
		proto, name string
		addr        netip.AddrPort
	}{
		"tcp-http": {"tcp", "allowed.test", web}, "proxy-http": {"proxy", "allowed.test", web}, "proxy-empty": {"proxy", "sub.wild.test", web},
		"tcp-echo": {"tcp", "", echo}, "proxy-echo": {"proxy", "", echo},
		"tcp-tls": {"tcp", "spliced.test", secure}, "proxy-tls": {"proxy", "spliced.test", secure},
	}
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(r.out), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			t.Fatalf("output line %q", line)
		}
		sent, _ := strconv.ParseInt(f[1], 10, 64)
		received, _ := strconv.ParseInt(f[2], 10, 64)
		k, ok := want[f[0]]
		if !ok || sent == 0 || received == 0 {
			t.Fatalf("output line %q", line)
		}
		seen++
		recs := w.log.await(func(r egress.Record) bool {
			return r.Proto == k.proto && r.Name == k.name && r.Addr == k.addr && r.Verdict == egress.Allowed
		})
		if len(recs) != 1 {
			t.Errorf("%s: %d records for %s %s, want 1: %+v", f[0], len(recs), k.proto, k.addr, recs)
			continue
		}
		if got := recs[0]; got.Sent != sent || got.Received != received {
			t.Errorf("%s: recorded %d sent, %d received; the computer's socket: %d sent, %d received", f[0], got.Sent, got.Received, sent, received)
		} else {
			t.Logf("%s: %d sent, %d received", f[0], sent, received)
		}
	}
	if seen != len(want) {
		t.Fatalf("%d connections reported, want %d:\n%s", seen, len(want), r.out)
	}
}
