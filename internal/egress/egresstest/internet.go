package egresstest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/cubicle-sandbox/cubicle/internal/egress"
)

// The test internet's hosts.
var (
	Web     = netip.MustParseAddr("198.51.100.10") // HTTP on :80; allowed.test, sub.wild.test
	Other   = netip.MustParseAddr("203.0.113.20")  // HTTP on :80; other.test
	Echo    = netip.MustParseAddr("203.0.113.7")   // TCP echo on :7, UDP sink on :9999
	DNS     = netip.MustParseAddr("198.51.100.53") // the authority for *.test
	Private = netip.MustParseAddr("10.9.9.9")      // what private.test resolves to
	// Web6 serves HTTP on :80 over IPv6 only: v6only.test has no A record.
	Web6     = netip.MustParseAddr("2001:db8::10")
	Private6 = netip.MustParseAddr("fd00::9") // what private6.test resolves to (a ULA)
	// Secure serves HTTPS on :443 (and HTTP on :80) for TLSNames with a
	// certificate of the test internet's own CA (Internet.CAPEM), and
	// answers every request with the headers it received (EchoHeaders).
	Secure = netip.MustParseAddr("198.51.100.30")
	Zone   = map[string]netip.Addr{"allowed.test.": Web, "sub.wild.test.": Web, "other.test.": Other, "private.test.": Private,
		"secret.test.": Secure, "spliced.test.": Secure, "api.secrets.test.": Secure, "untrusted.test.": Secure,
		"v6only.test.": Web6, "private6.test.": Private6}
	// TLSNames are the names Secure's certificate is for (untrusted.test
	// gets a certificate of a CA nobody trusts).
	TLSNames = []string{"secret.test", "spliced.test", "*.secrets.test"}
	hostAddr = []netip.Addr{Web, Other, Echo, DNS, Secure, Web6}
)

// Internet is a running test internet.
type Internet struct {
	Netns string // its path, for egress.NetnsDialer
	// CAPEM is the certificate of the CA that signed Secure's certificate
	// (egress.Config.UpstreamCA trusts it).
	CAPEM []byte
	// UDPSeen counts datagrams that reached the UDP sink.
	UDPSeen atomic.Int64
}

// TB is what New and Check need of their caller. testing.TB has it; a
// benchmark gives its own, whose Fatalf must not return either (it ends
// the goroutine, as testing's does) and whose Cleanup functions it runs,
// last first, when it is done.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// New makes the namespace and starts its servers; both go when the test
// ends (t's Cleanup).
func New(t TB) *Internet {
	t.Helper()
	var b [4]byte
	rand.Read(b[:])
	name := "cubicle-test-inet-" + hex.EncodeToString(b[:])
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	ip("netns", "add", name)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	ip("-n", name, "link", "set", "lo", "up")
	for _, a := range hostAddr {
		if a.Is4() {
			ip("-n", name, "addr", "add", a.String()+"/32", "dev", "lo")
		} else {
			ip("-n", name, "addr", "add", a.String()+"/128", "dev", "lo", "nodad")
		}
	}
	in := &Internet{Netns: "/run/netns/" + name}
	in.serveHTTP(t, Web)
	in.serveHTTP(t, Other)
	in.serveHTTP(t, Web6)
	in.serveEcho(t)
	in.serveDNS(t)
	in.serveTLS(t)
	in.serveSink(t)
	return in
}

// Config points egress's upstream side into the test internet.
func (in *Internet) Config() egress.Config {
	d := egress.NetnsDialer{Path: in.Netns}
	return egress.Config{
		UpstreamCA: in.CAPEM,
		Dialer:     d,
		Resolver: &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, netip.AddrPortFrom(DNS, 53).String())
		}},
	}
}

// listen opens a listener (or packet conn) inside the namespace.
func (in *Internet) listen(t TB, network, addr string) any {
	t.Helper()
	var v any
	err := egress.InNetns(in.Netns, func() error {
		var err error
		if strings.HasPrefix(network, "udp") {
			v, err = net.ListenPacket(network, addr)
		} else {
			v, err = net.Listen(network, addr)
		}
		return err
	})
	if err != nil {
		t.Fatalf("listen %s %s in the test internet: %v", network, addr, err)
	}
	t.Cleanup(func() { v.(io.Closer).Close() })
	return v
}

// serveHTTP answers every request with "hello <Host> from <address>",
// except /bytes: BytesSize zero bytes (/bytes?n=268435456 for 256 MiB).
func (in *Internet) serveHTTP(t TB, a netip.Addr) {
	l := in.listen(t, "tcp", netip.AddrPortFrom(a, 80).String()).(net.Listener)
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/bytes" {
			n, err := BytesSize(r.URL.Query().Get("n"))
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
			writeZeros(w, n)
			return
		}
		fmt.Fprintf(w, "hello %s from %s\n", r.Host, a)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
}

// MaxBytes bounds /bytes?n=.
const MaxBytes = 4 << 30

// BytesSize is the size /bytes?n= asks for: 1 MiB when n is empty, else a
// decimal number of bytes up to MaxBytes.
func BytesSize(n string) (int64, error) {
	if n == "" {
		return 1 << 20, nil
	}
	v, err := strconv.ParseInt(n, 10, 64)
	if err != nil || v < 0 || v > MaxBytes {
		return 0, fmt.Errorf("n must be a number of bytes from 0 to %d, got %q", int64(MaxBytes), n)
	}
	return v, nil
}

// zeroChunk is what writeZeros writes at a time.
var zeroChunk = make([]byte, 256<<10)

// writeZeros writes n zero bytes to w, stopping at its first error.
func writeZeros(w io.Writer, n int64) {
	for n > 0 {
		k, err := w.Write(zeroChunk[:min(n, int64(len(zeroChunk)))])
		n -= int64(k)
		if err != nil {
			return
		}
	}
}

// serveEcho echoes every TCP connection on Echo:7.
func (in *Internet) serveEcho(t TB) {
	l := in.listen(t, "tcp", netip.AddrPortFrom(Echo, 7).String()).(net.Listener)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
}

// serveSink counts datagrams to Echo:9999 (none may ever arrive).
func (in *Internet) serveSink(t TB) {
	c := in.listen(t, "udp", netip.AddrPortFrom(Echo, 9999).String()).(net.PacketConn)
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, _, err := c.ReadFrom(buf); err != nil {
				return
			}
			in.UDPSeen.Add(1)
		}
	}()
}

// serveDNS is the authority for Zone: A and AAAA records, NXDOMAIN for
// the rest.
func (in *Internet) serveDNS(t TB) {
	c := in.listen(t, "udp", netip.AddrPortFrom(DNS, 53).String()).(net.PacketConn)
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			if reply := zoneAnswer(buf[:n]); reply != nil {
				c.WriteTo(reply, from)
			}
		}
	}()
}

func zoneAnswer(q []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(q)
	if err != nil {
		return nil
	}
	question, err := p.Question()
	if err != nil {
		return nil
	}
	a, ok := Zone[strings.ToLower(question.Name.String())]
	h.Response, h.RCode = true, dnsmessage.RCodeSuccess
	if !ok {
		h.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, h)
	b.StartQuestions()
	b.Question(question)
	rh := dnsmessage.ResourceHeader{Name: question.Name, Class: dnsmessage.ClassINET, TTL: 60}
	switch {
	case ok && question.Type == dnsmessage.TypeA && a.Is4():
		b.StartAnswers()
		b.AResource(rh, dnsmessage.AResource{A: a.As4()})
	case ok && question.Type == dnsmessage.TypeAAAA && a.Is6():
		b.StartAnswers()
		b.AAAAResource(rh, dnsmessage.AAAAResource{AAAA: a.As16()})
	}
	out, _ := b.Finish()
	return out
}

// Check fails the test when the namespace has any link but loopback: the
// guarantee that nothing can leave the machine.
func (in *Internet) Check(t TB) {
	t.Helper()
	out, err := exec.Command("ip", "-n", strings.TrimPrefix(in.Netns, "/run/netns/"), "-o", "link").Output()
	if err != nil {
		t.Fatalf("ip link: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if !strings.Contains(line, ": lo:") {
			t.Fatalf("the test internet has a link besides loopback: %s", line)
		}
	}
	if _, err := os.Stat(in.Netns); err != nil {
		t.Fatalf("%v", err)
	}
}
