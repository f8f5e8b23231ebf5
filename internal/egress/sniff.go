package egress

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

const (
	// maxPeek bounds what is read of a connection's first bytes to find
	// its TLS server name or HTTP host.
	maxPeek = 16 << 10
	// peekFor bounds how long a client that started a TLS or HTTP request
	// may take to send the rest of its first message.
	peekFor = 10 * time.Second
)

// errStop ends the TLS handshake sniff once the ClientHello is seen.
var errStop = errors.New("client hello seen")

// sniff reads the start of what the computer sends on a connection and
// returns it (to be forwarded first) with the name it asks for: the TLS
// ClientHello's server name or the HTTP request's Host (without port). A
// connection that is neither, or whose client speaks only after the
// server, is not delayed: what arrived first is returned with no name.
func sniff(c net.Conn) ([]byte, string) {
	first := make([]byte, maxPeek)
	k, _ := c.Read(first)
	if k == 0 {
		return nil, "" // the copy that follows sees the same end or error
	}
	buf := bytes.NewBuffer(first[:k])
	c.SetReadDeadline(time.Now().Add(peekFor))
	defer c.SetReadDeadline(time.Time{})
	r := &recorder{c: c, buf: buf}
	switch {
	case buf.Bytes()[0] == 0x16: // a TLS handshake record
		return r.tlsName()
	case looksLikeHTTP(buf.Bytes()):
		return r.httpHost()
	}
	return buf.Bytes(), ""
}

// recorder reads what was peeked, then more from the connection, keeping
// everything it read (bounded by maxPeek) so it can be forwarded.
type recorder struct {
	c   net.Conn
	buf *bytes.Buffer
	off int
}

func (r *recorder) Read(p []byte) (int, error) {
	if r.off < r.buf.Len() {
		n := copy(p, r.buf.Bytes()[r.off:])
		r.off += n
		return n, nil
	}
	if r.buf.Len() >= maxPeek {
		return 0, io.ErrShortBuffer
	}
	p = p[:min(len(p), maxPeek-r.buf.Len())]
	n, err := r.c.Read(p)
	r.buf.Write(p[:n])
	r.off += n
	return n, err
}

func (r *recorder) tlsName() ([]byte, string) {
	var name string
	cfg := &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		name = h.ServerName
		return nil, errStop
	}}
	tls.Server(readOnly{r}, cfg).Handshake()
	return r.buf.Bytes(), strings.ToLower(name)
}

func (r *recorder) httpHost() ([]byte, string) {
	req, err := http.ReadRequest(bufio.NewReaderSize(r, 4096))
	if err != nil {
		return r.buf.Bytes(), ""
	}
	host := req.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return r.buf.Bytes(), strings.ToLower(strings.TrimSuffix(host, "."))
}

// looksLikeHTTP reports whether b starts like an HTTP/1 request line.
func looksLikeHTTP(b []byte) bool {
	for _, m := range []string{"GET ", "POST ", "PUT ", "HEAD ", "DELETE ", "OPTIONS ", "PATCH ", "CONNECT ", "TRACE "} {
		if bytes.HasPrefix(b, []byte(m)) {
			return true
		}
	}
	return false
}

// readOnly is a net.Conn that only reads (the TLS sniff must never answer
// the client).
type readOnly struct{ r io.Reader }

func (c readOnly) Read(p []byte) (int, error)     { return c.r.Read(p) }
func (readOnly) Write(p []byte) (int, error)      { return 0, io.ErrClosedPipe }
func (readOnly) Close() error                     { return nil }
func (readOnly) LocalAddr() net.Addr              { return nil }
func (readOnly) RemoteAddr() net.Addr             { return nil }
func (readOnly) SetDeadline(time.Time) error      { return nil }
func (readOnly) SetReadDeadline(time.Time) error  { return nil }
func (readOnly) SetWriteDeadline(time.Time) error { return nil }
