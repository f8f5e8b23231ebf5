package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/errdefs/errhttp"
)

// DefaultBodyTimeout is how long a request body may go without a byte.
const DefaultBodyTimeout = 30 * time.Second

// withBodyDeadline gives r's body a read deadline that every byte that
// arrives extends and the body's end lifts, so a client that stops sending
// is cut while an upload at any steady rate, and whatever the handler does
// once the body is read (an SSE stream, a long exec), is not.
func (a *API) withBodyDeadline(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody {
		return
	}
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(a.bodyTimeout)) != nil {
		return // the connection has no deadlines (a test recorder)
	}
	b := &deadlineBody{ReadCloser: r.Body, rc: rc, d: a.bodyTimeout}
	b.deadline.Store(time.Now().Add(a.bodyTimeout).UnixNano())
	r.Body = b
}

type deadlineBody struct {
	io.ReadCloser
	rc       *http.ResponseController
	d        time.Duration
	cut      atomic.Bool
	timedOut atomic.Bool
	// deadline is when the body times out, in Unix nanoseconds (0: lifted).
	deadline atomic.Int64
	once     sync.Once
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	if b.cut.Load() {
		return 0, fmt.Errorf("%w: the request was cut", io.ErrUnexpectedEOF)
	}
	n, err := b.ReadCloser.Read(p)
	var ne net.Error
	switch {
	case errors.Is(err, io.EOF):
		b.once.Do(func() { b.deadline.Store(0); b.rc.SetReadDeadline(time.Time{}) })
	case errors.As(err, &ne) && ne.Timeout() && !b.cut.Load():
		b.timedOut.Store(true)
		return n, fmt.Errorf("%w (%s)", errBodyTimeout, b.d)
	case n > 0 && !b.cut.Load():
		next := time.Now().Add(b.d)
		b.deadline.Store(next.UnixNano())
		b.rc.SetReadDeadline(next)
	}
	return n, err
}

// bodyError is err, a 400 for a body that ended before its end, or the
// 408 when r's body timed out. The server cancels
// the request's context inside the read that times out, before that read
// returns, so a caller may see the cancellation first, or the body cut by
// the handler that saw it (cutBody, which makes the read end as cut, not
// as timed out): a cancellation or a cut past the body's deadline is the
// timeout too.
func bodyError(r *http.Request, err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: the body ended before it was complete (its Content-Length or multipart boundary says more); nothing was stored", errBadRequest)
	}
	b, ok := r.Body.(*deadlineBody)
	if !ok || err == nil {
		return err
	}
	if b.timedOut.Load() || (errors.Is(err, context.Canceled) || b.cut.Load()) && b.pastDeadline(time.Now()) {
		return fmt.Errorf("%w (%s)", errBodyTimeout, b.d)
	}
	return err
}

// pastDeadline reports whether the body had timed out by now. A cut body
// counts too: the handler cuts the body when its context ends, and here
// the timeout ended it (a computer that went is reported before this).
func (b *deadlineBody) pastDeadline(now time.Time) bool {
	d := b.deadline.Load()
	return d != 0 && now.UnixNano() >= d
}

// cutBody ends the reading of r's body now (its computer is gone).
func cutBody(w http.ResponseWriter, r *http.Request) {
	if b, ok := r.Body.(*deadlineBody); ok {
		b.cut.Store(true)
	}
	http.NewResponseController(w).SetReadDeadline(time.Now())
}

// LimitListener accepts at most max connections at a time (0: no limit);
// one more is answered at once with 503 and closed, rather than queued
// behind clients that may never finish.
func LimitListener(ln net.Listener, max int) net.Listener {
	if max <= 0 {
		return ln
	}
	return &limitListener{Listener: ln, max: int64(max)}
}

type limitListener struct {
	net.Listener
	max  int64
	open atomic.Int64
}

const tooManyConnections = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s"

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= l.max {
			return &limitedConn{Conn: c, l: l}, nil
		}
		l.open.Add(-1)
		go refuse(c, l.max)
	}
}

// refuse answers a connection over the limit and closes it, with the
// error body of every other error (no request was read, so no request id).
func refuse(c net.Conn, max int64) {
	msg := fmt.Sprintf("the server holds its limit of %d connections (server.max_connections); retry shortly", max)
	body, _ := json.Marshal(map[string]any{"error": errhttp.NewBody(context.Background(), http.StatusServiceUnavailable, "too_many_connections", msg)})
	c.SetWriteDeadline(time.Now().Add(time.Second))
	fmt.Fprintf(c, tooManyConnections, len(body), body)
	c.Close()
}

type limitedConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}
