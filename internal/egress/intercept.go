package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// clientFirstWait is how long a connection to a domain with secrets may
// take to send its first bytes before it is spliced without interception
// (a protocol where the server speaks first never is intercepted).
const clientFirstWait = 3 * time.Second

// interceptIf takes over a connection to a domain that has secrets when
// what the computer sends first is a TLS ClientHello for that very name:
// it returns true once the connection is done. Otherwise (plain HTTP,
// another protocol, no or another server name) it returns the connection
// with what was read put back, to be spliced as any other; a fronted name
// is refused there.
func (n *computerNet) interceptIf(in, up net.Conn, t target, rec Record) (net.Conn, bool) {
	secrets := n.pol.secretsFor(t.name)
	if t.name == "" || len(secrets) == 0 {
		return in, false
	}
	in.SetReadDeadline(time.Now().Add(clientFirstWait))
	head, name := sniff(in)
	in.SetReadDeadline(time.Time{})
	in = &prefixConn{Conn: in, head: head}
	if len(head) == 0 || head[0] != 0x16 || name != t.name {
		return in, false
	}
	n.intercept(in, up, t, rec, secrets)
	return nil, true
}

// intercept terminates the computer's TLS with a certificate of its own CA
// for the name, opens TLS to the real server (verified against the host's
// roots and the configured extra CA, never the computer's), and carries
// HTTP/1.1 requests one by one, each with the domain's secrets set as
// headers (replacing any the request had). A request whose Host names
// another domain is refused (421) and ends the connection.
func (n *computerNet) intercept(in, up net.Conn, t target, rec Record, secrets []sandbox.DomainSecret) {
	cc := &countConn{Conn: in, ctx: n.ctx, limit: n.bytes()}
	f, ok := n.startFlow(in, up, rec)
	if !ok {
		return
	}
	defer n.untrack(f)
	defer func() {
		f.abort()
		rec.Sent, rec.Received = cc.read.Load(), cc.written.Load()
		n.finish(rec)
	}()
	rec.Intercepted = true
	ctx, cancel := context.WithTimeout(n.ctx, peekFor)
	defer cancel()
	uc := tls.Client(up, &tls.Config{ServerName: t.name, RootCAs: n.svc.roots,
		NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12})
	upErr := uc.HandshakeContext(ctx)
	leaf, err := n.ca.leaf(t.name)
	if err != nil {
		rec.Verdict, rec.Error = Failed, err.Error()
		return
	}
	c := tls.Server(cc, &tls.Config{Certificates: []tls.Certificate{*leaf},
		NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12})
	if err := c.HandshakeContext(ctx); err != nil {
		rec.Verdict, rec.Error = Failed, "the computer's TLS handshake: "+err.Error()
		return
	}
	if upErr != nil {
		// The computer's TLS is up: say why in an answer it can read.
		rec.Verdict, rec.Error = Failed, "upstream TLS: "+upErr.Error()
		plainReply(c, http.StatusBadGateway, fmt.Sprintf("cannot reach %s over verified TLS: %v", t.name, upErr))
		return
	}
	rec.Verdict = Allowed
	if fronted, err := n.carry(c, uc, t.name, secrets); fronted != "" {
		rec.Verdict, rec.Rule = Refused, "fronting:"+fronted
	} else if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		rec.Error = err.Error()
	}
}

// carry serves the computer's requests on c, sending each to u with the
// secrets set. It returns the name a request fronted (then the connection
// ends), or why it ended.
func (n *computerNet) carry(c, u net.Conn, name string, secrets []sandbox.DomainSecret) (string, error) {
	cr, ur := bufio.NewReaderSize(c, 16<<10), bufio.NewReaderSize(u, 16<<10)
	for {
		req, err := http.ReadRequest(cr)
		if err != nil {
			return "", err
		}
		if host := hostOnly(req.Host); host != "" && host != name {
			plainReply(c, http.StatusMisdirectedRequest, fmt.Sprintf("this connection is for %s, not %s", name, host))
			return host, nil
		}
		if req.Host == "" {
			req.Host = name
		}
		if strings.EqualFold(req.Header.Get("Expect"), "100-continue") {
			req.Header.Del("Expect") // answered here: the body follows at once
			if _, err := io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
				return "", err
			}
		}
		if _, ok := req.Header["User-Agent"]; !ok {
			req.Header["User-Agent"] = []string{""} // Write adds none then
		}
		for _, s := range secrets {
			req.Header.Set(s.Name, s.Value)
		}
		if err := req.Write(u); err != nil {
			return "", err
		}
		resp, err := http.ReadResponse(ur, req)
		for err == nil && resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			if err = resp.Write(c); err == nil {
				resp, err = http.ReadResponse(ur, req)
			}
		}
		if err != nil {
			return "", err
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			// A WebSocket or other upgrade: from here on both ways as they
			// are (the secrets went with the request that asked for it).
			if err := resp.Write(c); err != nil {
				return "", err
			}
			done := make(chan struct{})
			go func() { io.Copy(u, cr); u.Close(); close(done) }()
			io.Copy(c, ur)
			c.Close()
			<-done
			return "", nil
		}
		err = resp.Write(c)
		resp.Body.Close()
		if err != nil {
			return "", err
		}
		if req.Close || resp.Close {
			return "", nil
		}
	}
}

// hostOnly is a Host header's name, lower case, without port or final dot.
func hostOnly(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	return strings.ToLower(strings.TrimSuffix(h, "."))
}

// plainReply answers one HTTP request with status and why, then the
// connection ends.
func plainReply(c net.Conn, status int, why string) {
	body := "cubicle: " + why + "\n"
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
}

// prefixConn is a connection whose first bytes were read already: head is
// read again first.
type prefixConn struct {
	net.Conn
	head []byte
}

func (p *prefixConn) Read(b []byte) (int, error) {
	if len(p.head) > 0 {
		k := copy(b, p.head)
		p.head = p.head[k:]
		return k, nil
	}
	return p.Conn.Read(b)
}

// CloseWrite passes a half-close on to the connection.
func (p *prefixConn) CloseWrite() error {
	if cw, ok := p.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return p.Conn.Close()
}

// countConn counts the bytes of the computer's side of an intercepted
// connection (its TLS records, as a spliced connection's are counted) and
// holds both ways to the organisation's byte rate.
type countConn struct {
	net.Conn
	ctx           context.Context
	limit         *rate.Limiter
	read, written atomic.Int64
}

func (c *countConn) Read(p []byte) (int, error) {
	if c.limit != nil && len(p) > c.limit.Burst() {
		p = p[:c.limit.Burst()]
	}
	k, err := c.Conn.Read(p)
	c.read.Add(int64(k))
	if k > 0 && c.limit != nil {
		if werr := c.limit.WaitN(c.ctx, k); werr != nil && err == nil {
			err = werr
		}
	}
	return k, err
}

func (c *countConn) Write(p []byte) (int, error) {
	var k int
	for len(p) > 0 {
		chunk := p
		if c.limit != nil {
			chunk = p[:min(len(p), c.limit.Burst())]
			if err := c.limit.WaitN(c.ctx, len(chunk)); err != nil {
				return k, err
			}
		}
		w, err := c.Conn.Write(chunk)
		k += w
		c.written.Add(int64(w))
		if err != nil {
			return k, err
		}
		p = p[w:]
	}
	return k, nil
}
