package egress_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/cubicle-sandbox/cubicle/internal/egress"
	"github.com/cubicle-sandbox/cubicle/internal/egress/egresstest"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/linux"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/sandboxtest"
	"github.com/cubicle-sandbox/cubicle/internal/testbin"
)

var agentBin string

func TestMain(m *testing.M) {
	os.Exit(testbin.Main(m, &agentBin))
}

// records collects the egress log.
type records struct {
	mu   sync.Mutex
	list []egress.Record
}

func (r *records) add(rec egress.Record) {
	r.mu.Lock()
	r.list = append(r.list, rec)
	r.mu.Unlock()
}

// find returns the records matching f.
func (r *records) find(f func(egress.Record) bool) []egress.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []egress.Record
	for _, rec := range r.list {
		if f(rec) {
			out = append(out, rec)
		}
	}
	return out
}

// await returns the records matching f once there is one (a flow is
// recorded when it ends, after the client saw its last byte), or none
// after 10 s.
func (r *records) await(f func(egress.Record) bool) []egress.Record {
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if found := r.find(f); len(found) > 0 || time.Now().After(end) {
			return found
		}
	}
}

// world is a test internet, an egress service dialing into it, and a
// driver whose internet computers use that service.
type world struct {
	in  *egresstest.Internet
	log *records
	d   *linux.Driver
}

func newWorld(t *testing.T, tweak func(*egress.Config)) *world {
	t.Helper()
	w := &world{in: egresstest.New(t), log: &records{}}
	w.in.Check(t)
	cfg := w.in.Config()
	cfg.Record = w.log.add
	if tweak != nil {
		tweak(&cfg)
	}
	svc, err := egress.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w.d, err = linux.New(linux.Config{StateDir: t.TempDir(), AgentPath: agentBin, Network: svc})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *world) computer(t *testing.T, p sandbox.InternetPolicy) sandbox.Sandbox {
	t.Helper()
	return sandboxtest.Start(t, w.d, func(s *sandbox.Spec) {
		s.Network, s.Internet = sandbox.NetworkInternet, p
		s.Owner = sandbox.Owner{Org: "org_test", Key: "key_test"}
	})
}

type result struct {
	sandbox.ExitStatus
	out, err string
}

func run(t *testing.T, sb sandbox.Sandbox, argv ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := sb.Exec(ctx, sandbox.ExecRequest{Argv: argv, Timeout: 20 * time.Second}, sandbox.ExecIO{Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatalf("%v: %v", argv, err)
	}
	return result{st, out.String(), errb.String()}
}

const python = "/usr/bin/python3"

// connectPy connects to host:port and prints "connected" or the errno name.
const connectPy = `
import socket, sys, errno
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM); s.settimeout(10)
try:
    s.connect((sys.argv[1], int(sys.argv[2])))
    s.sendall(b"ping"); print("connected", s.recv(16).decode())
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e)))
`

// dnsPy asks server (any address) for an A record of name over UDP and
// prints the rcode and the answer's address.
const dnsPy = `
import socket, struct, sys
name, server = sys.argv[1], sys.argv[2]
q = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
q += b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0" + struct.pack(">HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(5)
s.sendto(q, (server, 53))
r = s.recv(512)
rcode, an = r[3] & 15, struct.unpack(">H", r[6:8])[0]
print("rcode", rcode, "answers", an, ".".join(str(b) for b in r[-4:]) if an else "")
`

// udpPy sends a datagram to a connected UDP socket and prints what recv
// says (ECONNREFUSED: an ICMP port unreachable came back).
const udpPy = `
import socket, sys, errno
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(3)
s.connect((sys.argv[1], int(sys.argv[2])))
s.send(b"hello")
try:
    s.recv(16); print("answered")
except OSError as e:
    print(errno.errorcode.get(e.errno, "timeout" if isinstance(e, socket.timeout) else str(e)))
`

func TestInternetComputer(t *testing.T) {
	w := newWorld(t, nil)
	sb := w.computer(t, sandbox.InternetPolicy{
		Domains: []string{"allowed.test", "*.wild.test", "private.test"},
		CIDRs:   []netip.Prefix{netip.MustParsePrefix("203.0.113.7/32")},
	})
	expect := func(t *testing.T, r result, want string) {
		t.Helper()
		if !strings.Contains(r.out, want) {
			t.Errorf("got exit %d, stdout %q, stderr %q; want %q", r.ExitCode, r.out, r.err, want)
		}
	}
	t.Run("allowed name over HTTP, direct (curl, python)", func(t *testing.T) {
		expect(t, run(t, sb, "curl", "-sS", "--noproxy", "*", "--max-time", "10", "http://allowed.test/"), "hello allowed.test from 198.51.100.10")
		expect(t, run(t, sb, python, "-c", "import urllib.request as u; print(u.build_opener(u.ProxyHandler({})).open('http://sub.wild.test/', timeout=10).read().decode())"),
			"hello sub.wild.test from 198.51.100.10")
	})
	t.Run("a name outside the policy is NXDOMAIN", func(t *testing.T) {
		r := run(t, sb, "curl", "-sS", "--noproxy", "*", "--max-time", "10", "http://other.test/")
		if r.ExitCode != 6 { // curl: could not resolve host
			t.Errorf("curl other.test: exit %d, %q", r.ExitCode, r.err)
		}
		expect(t, run(t, sb, python, "-c", dnsPy, "other.test", sandbox.Nameserver), "rcode 3 answers 0")
		expect(t, run(t, sb, python, "-c", dnsPy, "wild.test", sandbox.Nameserver), "rcode 3 answers 0")
	})
	t.Run("DNS to any server is answered by Cubicle", func(t *testing.T) {
		r := run(t, sb, python, "-c", dnsPy, "allowed.test", "8.8.8.8")
		expect(t, r, "rcode 0 answers 1 198.18.")
		expect(t, run(t, sb, python, "-c", dnsPy, "other.test", egresstest.DNS.String()), "rcode 3 answers 0")
	})
	t.Run("a name resolving to a private address is refused", func(t *testing.T) {
		expect(t, run(t, sb, python, "-c", dnsPy, "private.test", "8.8.8.8"), "rcode 3 answers 0")
		if len(w.log.find(func(r egress.Record) bool {
			return r.Proto == "dns" && r.Name == "private.test" && r.Verdict == egress.Refused && strings.HasPrefix(r.Rule, "private:10.0.0.0/8")
		})) == 0 {
			t.Error("no refused dns record for private.test with the private rule")
		}
	})
	t.Run("IP literals only through a CIDR rule", func(t *testing.T) {
		expect(t, run(t, sb, python, "-c", connectPy, egresstest.Echo.String(), "7"), "connected ping")
		expect(t, run(t, sb, python, "-c", connectPy, egresstest.Web.String(), "80"), "ECONNREFUSED")
		// /etc/hosts-style spoofing: an allowed name pinned to an address
		// the computer chose is just that address.
		r := run(t, sb, "curl", "-sS", "--noproxy", "*", "--max-time", "10", "--resolve", "allowed.test:80:"+egresstest.Other.String(), "http://allowed.test/")
		if r.ExitCode != 7 || strings.Contains(r.out, "hello") {
			t.Errorf("curl --resolve to a refused address: exit %d, %q %q (want 7: connection refused)", r.ExitCode, r.out, r.err)
		}
	})
	t.Run("private and host addresses are refused", func(t *testing.T) {
		targets := []string{"169.254.169.254", "10.200.0.1", "127.0.0.53"}
		for _, a := range hostAddrs(t) {
			targets = append(targets, a.String())
		}
		for _, a := range targets {
			expect(t, run(t, sb, python, "-c", connectPy, a, "80"), "ECONNREFUSED")
		}
	})
	t.Run("a port scan of the host finds nothing but the proxy", func(t *testing.T) {
		// Every TCP port 1-1024 and a few high ones of each of the host's
		// own addresses is refused at once; on the gateway only Cubicle's
		// proxy answers over TCP (its DNS is UDP only).
		scan := `import socket, sys
ports = list(range(1, 1025)) + [3128, 5432, 6379, 8080, 8443, 9090]
for host in sys.argv[1:]:
    open_ = []
    for p in ports:
        s = socket.socket(); s.settimeout(5)
        if s.connect_ex((host, p)) == 0: open_.append(p)
        s.close()
    print(host, open_)`
		hosts := []string{sandbox.Nameserver}
		for _, a := range hostAddrs(t) {
			hosts = append(hosts, a.String())
		}
		r := run(t, sb, append([]string{python, "-c", scan}, hosts...)...)
		want := sandbox.Nameserver + " [3128]\n"
		for _, h := range hosts[1:] {
			want += h + " []\n"
		}
		if r.out != want {
			t.Errorf("port scan: %q %q, want %q", r.out, r.err, want)
		}
	})
	t.Run("without secrets, no CA: the trust store is the host's", func(t *testing.T) {
		host, err := os.ReadFile(sandbox.CABundleFile)
		if err != nil {
			t.Fatal(err)
		}
		expect(t, run(t, sb, "grep", "-c", "BEGIN CERTIFICATE", sandbox.CABundleFile),
			strconv.Itoa(strings.Count(string(host), "BEGIN CERTIFICATE"))+"\n")
	})
	t.Run("UDP other than DNS is refused at once", func(t *testing.T) {
		expect(t, run(t, sb, python, "-c", udpPy, egresstest.Echo.String(), "9999"), "ECONNREFUSED")
		expect(t, run(t, sb, python, "-c", udpPy, egresstest.Web.String(), "443"), "ECONNREFUSED") // QUIC
		if n := w.in.UDPSeen.Load(); n != 0 {
			t.Errorf("%d datagrams reached the test internet's UDP sink", n)
		}
	})
	t.Run("through the proxy the variables name, the same policy", func(t *testing.T) {
		expect(t, run(t, sb, "sh", "-c", "echo $HTTPS_PROXY; echo $no_proxy"), ":3128\nlocalhost,127.0.0.1")
		// The same variables in a file, for programs that do not inherit
		// them, readable by the sandbox user only.
		expect(t, run(t, sb, "sh", "-c", `stat -c '%a %U' `+linux.NetworkEnvFile+`; set -a; . `+linux.NetworkEnvFile+`; env -i sh -c ". `+linux.NetworkEnvFile+`; echo \$HTTPS_PROXY" | grep -c ':3128'`), "600 user\n1")
		expect(t, run(t, sb, "curl", "-sS", "--max-time", "10", "http://allowed.test/"), "hello allowed.test from 198.51.100.10")
		expect(t, run(t, sb, python, "-c", "import urllib.request as u; print(u.urlopen('http://sub.wild.test/', timeout=10).read().decode())"),
			"hello sub.wild.test from 198.51.100.10")
		expect(t, run(t, sb, "curl", "-sS", "--max-time", "10", "-w", "%{http_code}", "http://other.test/"),
			"cubicle: other.test is not allowed by this computer's network policy (not-allowed)\n403")
		// A proxy takes the host from the request's URL, never from a Host
		// header (RFC 9112 §3.2.2): no fronting through it.
		expect(t, run(t, sb, "curl", "-sS", "--max-time", "10", "-H", "Host: other.test", "http://allowed.test/"), "hello allowed.test from")
		expect(t, run(t, sb, "curl", "-sS", "--max-time", "10", "-w", "%{http_code}", "http://169.254.169.254/"), "private:169.254.0.0/16")
		// Credentials are this computer's: others get 407.
		expect(t, run(t, sb, "curl", "-sS", "--max-time", "10", "-w", "%{http_code}", "-x", "http://cubicle:wrong@"+sandbox.Nameserver+":3128", "http://allowed.test/"), "407")
		connectPy := `import socket, sys
s = socket.create_connection(("` + sandbox.Nameserver + `", 3128), timeout=10)
import os, base64
cred = os.environ["HTTPS_PROXY"].split("//")[1].split("@")[0]
s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n" % (sys.argv[1], sys.argv[1], base64.b64encode(cred.encode()).decode())).encode())
head = s.recv(4096).decode().split("\r\n")[0]
print(head)
if " 200 " in head:
    s.sendall(sys.argv[2].encode()); print(s.recv(4096).decode())`
		expect(t, run(t, sb, python, "-c", connectPy, egresstest.Echo.String()+":7", "ping"), "200 Connection established\nping")
		expect(t, run(t, sb, python, "-c", connectPy, "allowed.test:80", "GET / HTTP/1.0\r\nHost: allowed.test\r\n\r\n"), "hello allowed.test")
		expect(t, run(t, sb, python, "-c", connectPy, egresstest.Web.String()+":80", ""), "403 Forbidden")
		if len(w.log.find(func(r egress.Record) bool {
			return r.Proto == "proxy" && r.Verdict == egress.Allowed && r.Name == "allowed.test"
		})) == 0 {
			t.Error("no allowed proxy record for allowed.test")
		}
	})
	t.Run("a TLS server name or HTTP Host naming another domain is refused (fronting)", func(t *testing.T) {
		r := run(t, sb, "curl", "-sS", "--noproxy", "*", "--max-time", "10", "-H", "Host: other.test", "http://allowed.test/")
		if r.ExitCode == 0 || strings.Contains(r.out, "hello") {
			t.Errorf("curl with Host: other.test: exit %d, %q", r.ExitCode, r.out)
		}
		expect(t, run(t, sb, "curl", "-sS", "--noproxy", "*", "--max-time", "10", "-H", "Host: ALLOWED.test:80", "http://allowed.test/"), "hello ALLOWED.test:80")
		tlsPy := `import socket, ssl
c = ssl.create_default_context(); c.check_hostname = False; c.verify_mode = ssl.CERT_NONE
s = socket.create_connection(("allowed.test", 80), timeout=10)
try:
    c.wrap_socket(s, server_hostname="other.test"); print("handshake")
except (OSError, ssl.SSLError) as e:
    print("closed", type(e).__name__)`
		expect(t, run(t, sb, python, "-c", tlsPy), "closed")
		for _, name := range []string{"fronting:other.test"} {
			if len(w.log.find(func(r egress.Record) bool { return r.Rule == name && r.Verdict == egress.Refused })) < 2 {
				t.Errorf("want a refused record with rule %s for HTTP and for TLS", name)
			}
		}
	})
	t.Run("every connection is recorded", func(t *testing.T) {
		ok := w.log.find(func(r egress.Record) bool {
			return r.Proto == "tcp" && r.Name == "allowed.test" && r.Verdict == egress.Allowed &&
				r.Rule == "domain:allowed.test" && r.Addr == netip.AddrPortFrom(egresstest.Web, 80) && r.Received > 0 && r.Sent > 0
		})
		refused := w.log.find(func(r egress.Record) bool {
			return r.Proto == "tcp" && r.Verdict == egress.Refused && r.Rule == "not-allowed" && r.Addr == netip.AddrPortFrom(egresstest.Web, 80)
		})
		if len(ok) == 0 || len(refused) == 0 {
			t.Errorf("records: %d allowed to allowed.test, %d refused literal; all: %+v", len(ok), len(refused), w.log.find(func(egress.Record) bool { return true }))
		}
	})
}

// TestIPv6 (issue 13): a computer speaks IPv4 only (its interface has no
// IPv6 address or route), so an IPv6 literal fails inside at once
// (ENETUNREACH) and never reaches Cubicle; a name whose only addresses
// are IPv6 is reached by name, Cubicle dialing its own IPv6 resolution;
// one that resolves to a private IPv6 address (a ULA) is refused like a
// private IPv4 one.
func TestIPv6(t *testing.T) {
	w := newWorld(t, nil)
	sb := w.computer(t, sandbox.InternetPolicy{
		Domains: []string{"v6only.test", "private6.test"},
		CIDRs:   []netip.Prefix{netip.MustParsePrefix("2001:db8::/32")},
	})
	r := run(t, sb, "curl", "-sS", "--noproxy", "*", "--max-time", "10", "http://v6only.test/")
	if !strings.Contains(r.out, "hello v6only.test from 2001:db8::10") {
		t.Errorf("v6only.test by name: exit %d, %q %q", r.ExitCode, r.out, r.err)
	}
	if len(w.log.await(func(r egress.Record) bool {
		return r.Proto == "tcp" && r.Name == "v6only.test" && r.Verdict == egress.Allowed && r.Addr == netip.AddrPortFrom(egresstest.Web6, 80)
	})) == 0 {
		t.Error("no allowed record to [2001:db8::10]:80 for v6only.test")
	}
	r = run(t, sb, python, "-c", dnsPy, "private6.test", "8.8.8.8")
	if !strings.Contains(r.out, "rcode 3 answers 0") {
		t.Errorf("private6.test: %q %q", r.out, r.err)
	}
	if len(w.log.await(func(r egress.Record) bool {
		return r.Name == "private6.test" && r.Verdict == egress.Refused && strings.HasPrefix(r.Rule, "private:fc00::/7")
	})) == 0 {
		t.Error("no refused record for private6.test with the private rule")
	}
	v6 := `import socket, errno
s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM); s.settimeout(10)
try:
    s.connect(("2001:db8::10", 80)); print("connected")
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno))`
	if r := run(t, sb, python, "-c", v6); strings.TrimSpace(r.out) != "ENETUNREACH" {
		t.Errorf("an IPv6 literal from inside: %q %q (want ENETUNREACH)", r.out, r.err)
	}
}

// hostAddrs are this host's own non-loopback IPv4 addresses.
func hostAddrs(t *testing.T) []netip.Addr {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var out []netip.Addr
	for _, a := range addrs {
		p, err := netip.ParsePrefix(a.String())
		if err == nil && p.Addr().Is4() && !p.Addr().IsLoopback() {
			out = append(out, p.Addr())
		}
	}
	return out
}

func TestNoneComputerHasNoInterface(t *testing.T) {
	w := newWorld(t, nil)
	sb := sandboxtest.Start(t, w.d, nil)
	r := run(t, sb, "cat", "/proc/net/dev", "/etc/resolv.conf")
	if strings.Contains(r.out, "eth0") || !strings.Contains(r.out, "no network") {
		t.Errorf("a none computer: %q", r.out)
	}
	if r := run(t, sb, python, "-c", connectPy, egresstest.Echo.String(), "7"); !strings.Contains(r.out, "ENETUNREACH") {
		t.Errorf("connect from a none computer: %q %q", r.out, r.err)
	}
}

func TestInternetEndsWithTheComputer(t *testing.T) {
	w := newWorld(t, nil)
	sb := w.computer(t, sandbox.InternetPolicy{CIDRs: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}})
	// A connection open when the computer is killed is closed and recorded.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opened := make(chan struct{})
	go sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{python, "-c",
		fmt.Sprintf("import socket,time; s=socket.create_connection(('%s',7)); s.sendall(b'x'); s.recv(1); print('open', flush=True); time.sleep(60)", egresstest.Echo)}},
		sandbox.ExecIO{Stdout: signalWriter(opened)})
	select {
	case <-opened:
	case <-time.After(20 * time.Second):
		t.Fatal("the computer's connection did not open within 20 s")
	}
	if err := sb.Kill(context.Background()); err != nil {
		t.Fatal(err)
	}
	open := func() []egress.Record {
		return w.log.find(func(r egress.Record) bool { return r.Addr == netip.AddrPortFrom(egresstest.Echo, 7) })
	}
	for deadline := time.Now().Add(20 * time.Second); len(open()) == 0 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	recs := open()
	if len(recs) != 1 || recs[0].Verdict != egress.Allowed || recs[0].Sent != 1 || recs[0].Received != 1 {
		t.Fatalf("the open connection's record after Kill: %+v", recs)
	}
}

// signalWriter closes ch at the first write.
type signalWriter chan struct{}

func (w signalWriter) Write(p []byte) (int, error) {
	select {
	case <-w:
	default:
		close(w)
	}
	return len(p), nil
}

// TestConnectionsPerComputerBounded: a computer holding connections open
// gets at most 256 at once; the rest are refused at connect, and recorded.
func TestConnectionsPerComputerBounded(t *testing.T) {
	w := newWorld(t, nil)
	sb := w.computer(t, sandbox.InternetPolicy{CIDRs: []netip.Prefix{netip.MustParsePrefix("203.0.113.7/32")}})
	r := run(t, sb, python, "-c", fmt.Sprintf(`import socket, errno, resource
resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))
held, refused = [], 0
for i in range(300):
    s = socket.socket(); s.settimeout(10)
    try:
        s.connect(("%s", 7)); held.append(s)
    except OSError as e:
        refused += e.errno == errno.ECONNREFUSED
print(len(held), refused)`, egresstest.Echo))
	var held, refused int
	if _, err := fmt.Sscan(r.out, &held, &refused); err != nil || held != 256 || refused != 44 {
		t.Fatalf("300 connections held open: %q %q (want 256 held, 44 refused)", r.out, r.err)
	}
	if len(w.log.find(func(r egress.Record) bool { return r.Rule == "too-many-connections" })) != 44 {
		t.Error("want 44 records refused with too-many-connections")
	}
}

// connectMany connects n times to Echo:7 from sb, holding each, and
// returns how many connected and how many were refused.
func connectMany(t *testing.T, sb sandbox.Sandbox, n int) (held, refused int) {
	t.Helper()
	r := run(t, sb, python, "-c", fmt.Sprintf(`import socket, errno
held, refused = [], 0
for i in range(%d):
    s = socket.socket(); s.settimeout(10)
    try:
        s.connect(("%s", 7)); held.append(s)
    except OSError as e:
        refused += e.errno == errno.ECONNREFUSED
print(len(held), refused)`, n, egresstest.Echo))
	if _, err := fmt.Sscan(r.out, &held, &refused); err != nil {
		t.Fatalf("%q %q", r.out, r.err)
	}
	return held, refused
}

var echoOnly = sandbox.InternetPolicy{CIDRs: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}}

// TestRateLimitConnections: an organisation past its connection rate gets
// refusals at connect, each recorded and reported for the audit trail.
func TestRateLimitConnections(t *testing.T) {
	var mu sync.Mutex
	var limited []egress.Record
	w := newWorld(t, func(c *egress.Config) {
		c.Limiter = egress.NewRateLimits(0.01, 3, 0) // a burst of 3, then one per 100 s
		c.RateLimited = func(r egress.Record) { mu.Lock(); limited = append(limited, r); mu.Unlock() }
	})
	sb := w.computer(t, echoOnly)
	if held, refused := connectMany(t, sb, 6); held != 3 || refused != 3 {
		t.Fatalf("6 connections at a burst of 3: %d held, %d refused", held, refused)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(limited) != 3 || limited[0].Org != "org_test" || limited[0].Key != "key_test" || limited[0].Computer != sb.ID() {
		t.Errorf("rate-limited reports: %+v", limited)
	}
	if n := len(w.log.find(func(r egress.Record) bool { return r.Rule == "rate-limited" && r.Verdict == egress.Refused })); n != 3 {
		t.Errorf("%d records refused with rate-limited, want 3", n)
	}
}

// TestRateLimitBytes: an organisation's byte rate shapes its downloads.
func TestRateLimitBytes(t *testing.T) {
	w := newWorld(t, func(c *egress.Config) { c.Limiter = egress.NewRateLimits(0, 0, 1<<20) })
	sb := w.computer(t, sandbox.InternetPolicy{Domains: []string{"allowed.test"}})
	r := run(t, sb, "curl", "-sS", "--noproxy", "*", "-o", "/dev/null", "-w", "%{size_download} %{time_total}", "http://allowed.test/bytes?n=3145728")
	var size int64
	var secs float64
	if _, err := fmt.Sscan(r.out, &size, &secs); err != nil || size != 3<<20 {
		t.Fatalf("download: %q %q", r.out, r.err)
	}
	// 1 MiB of burst, then 1 MiB/s: at least about 2 s for 3 MiB.
	if secs < 1.5 {
		t.Errorf("3 MiB at 1 MiB/s took %.2f s", secs)
	}
}

// failingLimiter cannot answer.
type failingLimiter struct{}

func (failingLimiter) AllowConn(string) (bool, error) { return false, errors.New("limiter down") }
func (failingLimiter) Bytes(string) *rate.Limiter     { return nil }

// TestRateLimiterFailsOpen: a limiter that does not answer lets
// connections through (the seed's rule), none refused.
func TestRateLimiterFailsOpen(t *testing.T) {
	w := newWorld(t, func(c *egress.Config) { c.Limiter = failingLimiter{} })
	sb := w.computer(t, echoOnly)
	if held, refused := connectMany(t, sb, 4); held != 4 || refused != 0 {
		t.Fatalf("with a failing limiter: %d held, %d refused", held, refused)
	}
}

// TestAttachFailsVisibly: the interface is made in the background of the
// computer's boot, so a namespace that cannot take it fails at Wait (with
// the reason), not silently; the Link still closes.
func TestAttachFailsVisibly(t *testing.T) {
	in := egresstest.New(t)
	svc, err := egress.New(in.Config())
	if err != nil {
		t.Fatal(err)
	}
	l, err := svc.Attach(t.Context(), sandbox.Attachment{ComputerID: "cmp_gone", Netns: "/proc/0/ns/net"})
	if err != nil {
		t.Fatalf("Attach: %v (the namespace is only opened in the background)", err)
	}
	if err := l.Wait(t.Context()); err == nil || !strings.Contains(err.Error(), "attach the computer's network") {
		t.Fatalf("Wait on a namespace that does not exist: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}
