package egress

import (
	"bufio"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// proxyPort is where a computer's HTTP proxy listens, on its gateway
// address: it exists only inside that computer's own stack.
const proxyPort = 3128

// proxyUser is the user name of the proxy's credentials; the password is
// the computer's token.
const proxyUser = "cubicle"

// proxyEnv is what every process of the computer gets: the proxy
// variables clients that expect a proxy read, with credentials valid for
// this computer only (they end with it). Clients that ignore them meet the
// same policy on their direct connections.
func (n *computerNet) proxyEnv() []string {
	u := fmt.Sprintf("http://%s:%s@%s:%d", proxyUser, n.token, sandbox.Nameserver, proxyPort)
	var env []string
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"} {
		env = append(env, k+"="+u, strings.ToLower(k)+"="+u)
	}
	return append(env, "NO_PROXY=localhost,127.0.0.1", "no_proxy=localhost,127.0.0.1")
}

// serveProxy accepts the computer's proxy connections until its network
// closes.
func (n *computerNet) serveProxy(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go n.proxy(c)
	}
}

// proxy serves one client connection: a CONNECT tunnel, or one plain HTTP
// request in absolute form. The target meets the same decision as a direct
// connection (names by Cubicle's resolution, literals by CIDR, the
// private-address rule, fronting); a refusal is an HTTP status with the
// reason, and every request is recorded.
func (n *computerNet) proxy(c net.Conn) {
	if !n.reserve() {
		c.Close()
		return
	}
	defer n.release()
	f := &flow{in: c, up: c}
	if !n.track(f) {
		c.Close()
		return
	}
	defer n.untrack(f)
	c.SetReadDeadline(time.Now().Add(peekFor))
	br := bufio.NewReaderSize(c, 4096)
	req, err := http.ReadRequest(br)
	if err != nil {
		c.Close()
		return
	}
	c.SetReadDeadline(time.Time{})
	rec := Record{Proto: "proxy", Opened: time.Now()}
	host, port, err := proxyTarget(req)
	if err != nil {
		n.refuse(c, http.StatusBadRequest, err.Error(), rec)
		return
	}
	rec.Name = host
	if !n.authorized(req) {
		rec.Rule = "proxy-credentials"
		n.refuse(c, http.StatusProxyAuthRequired, "the proxy credentials are not this computer's (they end when it stops)", rec)
		return
	}
	t, refused := n.decideHost(host)
	rec.Name, rec.Rule = t.name, t.rule
	if refused != "" {
		rec.Rule = refused
		n.refuse(c, http.StatusForbidden, fmt.Sprintf("%s is not allowed by this computer's network policy (%s)", host, refused), rec)
		return
	}
	if !n.allowConn() {
		rec.Rule = rateLimited
		n.refuse(c, http.StatusTooManyRequests, "the organisation's internet rate limit was reached; try again shortly", rec)
		return
	}
	up, to, err := n.dial(t, port)
	rec.Addr = to
	if err != nil {
		rec.Verdict, rec.Error = Failed, err.Error()
		n.reply(c, http.StatusBadGateway, "cannot reach "+host+": "+err.Error())
		n.finish(rec)
		c.Close()
		return
	}
	rec.Verdict = Allowed
	if req.Method == http.MethodConnect {
		fmt.Fprint(c, "HTTP/1.1 200 Connection established\r\n\r\n")
		n.splice(buffered{c, br}, up, t, rec)
		return
	}
	req.Header.Del("Proxy-Authorization")
	req.Header.Del("Proxy-Connection")
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header["User-Agent"] = []string{""} // Write adds none then: the request goes as the client sent it
	}
	req.Close = true // one request per upstream connection
	// The body, at the organisation's byte rate (http.NoBody stays: any
	// other empty body would be sent chunked).
	if lim := n.bytes(); lim != nil && req.Body != nil && req.Body != http.NoBody {
		req.Body = limitedBody{limitedReader{ctx: n.ctx, r: req.Body, l: lim}, req.Body}
	}
	// The request goes upstream as Cubicle rewrote it (origin form,
	// without the proxy's headers): those bytes are what it sent.
	cw := &countWriter{w: up}
	err = req.Write(cw)
	rec.Sent = cw.n
	if err != nil {
		up.Close()
		c.Close()
		rec.Verdict, rec.Error = Failed, err.Error()
		n.finish(rec)
		return
	}
	n.splice(buffered{c, br}, up, target{}, rec) // the request is sent; the answer comes back
}

// countWriter counts what is written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	k, err := c.w.Write(p)
	c.n += int64(k)
	return k, err
}

// limitedBody is a request body read at the organisation's byte rate.
type limitedBody struct {
	limitedReader
	io.Closer
}

// proxyTarget is the host and port a proxy request is for.
func proxyTarget(req *http.Request) (string, uint16, error) {
	hostport := req.Host
	if req.Method != http.MethodConnect {
		if req.URL.Scheme != "http" || req.URL.Host == "" {
			return "", 0, fmt.Errorf("a proxy request needs an absolute http:// URL (use CONNECT for https)")
		}
		hostport = req.URL.Host
		if req.URL.Port() == "" {
			hostport = net.JoinHostPort(req.URL.Hostname(), "80")
		}
	}
	host, p, err := net.SplitHostPort(hostport)
	port, perr := strconv.ParseUint(p, 10, 16)
	if err != nil || perr != nil || port == 0 {
		return "", 0, fmt.Errorf("%q is not host:port", hostport)
	}
	return strings.ToLower(strings.TrimSuffix(host, ".")), uint16(port), nil
}

// decideHost decides a target named by a client: an IP literal (or a
// synthetic address) as a direct connection to it, a name by the policy.
func (n *computerNet) decideHost(host string) (target, string) {
	if a, err := netip.ParseAddr(host); err == nil {
		return n.decide(a.Unmap())
	}
	name, ok := sandbox.NormalDomain(host)
	if !ok {
		return target{}, "not-a-name"
	}
	if rule := n.pol.domain(name); rule != "" {
		return target{name: name, rule: rule}, ""
	}
	return target{name: name}, "not-allowed"
}

// authorized checks the request's Proxy-Authorization against the
// computer's credentials.
func (n *computerNet) authorized(req *http.Request) bool {
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte(proxyUser+":"+n.token))
	got := req.Header.Get("Proxy-Authorization")
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// refuse answers a proxy request with status and why, and records it.
func (n *computerNet) refuse(c net.Conn, status int, why string, rec Record) {
	rec.Verdict = Refused
	n.reply(c, status, why)
	c.Close()
	n.finish(rec)
}

func (n *computerNet) reply(c net.Conn, status int, why string) {
	body := "cubicle: " + why + "\n"
	extra := ""
	if status == http.StatusProxyAuthRequired {
		extra = "Proxy-Authenticate: Basic realm=\"cubicle\"\r\n"
	}
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\n%sContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), extra, len(body), body)
}

// buffered is a connection whose first bytes were read into br already.
type buffered struct {
	net.Conn
	br *bufio.Reader
}

func (b buffered) Read(p []byte) (int, error) { return b.br.Read(p) }

// CloseWrite passes a half-close on to the connection.
func (b buffered) CloseWrite() error {
	if cw, ok := b.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return b.Conn.Close()
}
