package computer

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/log"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// Ports: what listens inside a computer, and TCP connections to its
// loopback (the HTTP proxy of internal/httpapi). The computer's agent
// dials 127.0.0.1 in the computer's network namespace, so nothing but the
// computer's own servers is reachable.

const (
	// MaxPortConns bounds the open port connections of one computer.
	MaxPortConns = 64
	// PortIdleTimeout closes a port connection that moved no byte either
	// way for that long.
	PortIdleTimeout = 10 * time.Minute
)

// portConns counts each computer's open port connections.
type portConns struct {
	mu sync.Mutex
	n  map[string]int
}

func (pc *portConns) acquire(id string) bool {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.n == nil {
		pc.n = make(map[string]int)
	}
	if pc.n[id] >= MaxPortConns {
		return false
	}
	pc.n[id]++
	return true
}

func (pc *portConns) release(id string) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.n[id]--; pc.n[id] <= 0 {
		delete(pc.n, id)
	}
}

// ValidPort checks a port number of a computer's route.
func ValidPort(port int) error {
	if port < 1 || port > 65535 {
		return fieldError("port", "a port is 1 to 65535, not %d", port)
	}
	return nil
}

func (m *Manager) portsOf(ctx context.Context, p governance.Principal, id string) (*live, sandbox.Ports, error) {
	l, err := m.running(ctx, p, id)
	if err != nil {
		return nil, nil, err
	}
	ports, ok := l.sb.(sandbox.Ports)
	if !ok {
		return nil, nil, errdefs.New(errdefs.FailedPrecondition, "ports_unsupported", "this host's computers cannot reach their ports")
	}
	return l, ports, nil
}

// CheckPorts checks that p may reach the ports of computer id, which runs.
func (m *Manager) CheckPorts(ctx context.Context, p governance.Principal, id string) error {
	_, _, err := m.portsOf(ctx, p, id)
	return err
}

// ListPorts lists the listening TCP sockets of a computer of p's organisation.
func (m *Manager) ListPorts(ctx context.Context, p governance.Principal, id string) (sandbox.PortList, error) {
	l, ports, err := m.portsOf(ctx, p, id)
	if err != nil {
		return sandbox.PortList{}, err
	}
	defer m.busy(l)()
	list, err := ports.ListPorts(ctx)
	if err != nil {
		return sandbox.PortList{}, m.callError(ctx, id, err)
	}
	return list, nil
}

// DialPort connects to 127.0.0.1:port inside a computer of p's
// organisation. The connection counts as a call while it is open (the
// computer does not idle out), is closed after PortIdleTimeout without a
// byte, and its bytes are logged when it closes. At most MaxPortConns
// are open per computer: past it, ResourceExhausted; nothing listening,
// BadGateway (port_refused).
func (m *Manager) DialPort(ctx context.Context, p governance.Principal, id string, port int) (net.Conn, error) {
	if err := ValidPort(port); err != nil {
		return nil, err
	}
	l, ports, err := m.portsOf(ctx, p, id)
	if err != nil {
		return nil, err
	}
	if !m.ports.acquire(id) {
		return nil, errdefs.New(errdefs.ResourceExhausted, "too_many_connections",
			fmt.Sprintf("%s has %d port connections open, the most it may", id, MaxPortConns))
	}
	done := m.busy(l)
	c, err := ports.DialPort(ctx, port)
	if err != nil {
		done()
		m.ports.release(id)
		if isAny(err, sandbox.ErrPortRefused) {
			return nil, errdefs.Wrap(errdefs.BadGateway, "port_refused",
				fmt.Errorf("nothing listens on port %d in %s (connection refused)", port, id))
		}
		return nil, m.callError(ctx, id, err)
	}
	mc := &meteredConn{Conn: c, start: time.Now(), log: log.From(ctx).With("computer", id, "port", port)}
	mc.idle = time.AfterFunc(PortIdleTimeout, func() {
		mc.idled.Store(true)
		c.Close()
	})
	mc.release = func() {
		mc.idle.Stop()
		done()
		m.ports.release(id)
	}
	return mc, nil
}

// meteredConn counts a port connection's bytes, closes it when idle, and
// logs it at its close.
type meteredConn struct {
	net.Conn
	start     time.Time
	log       interface{ Info(string, ...any) }
	idle      *time.Timer
	idled     atomic.Bool
	in, out   atomic.Int64 // to the computer, from it
	closeOnce sync.Once
	release   func()
}

func (c *meteredConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.out.Add(int64(n))
		c.idle.Reset(PortIdleTimeout)
	}
	return n, err
}

func (c *meteredConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if n > 0 {
		c.in.Add(int64(n))
		c.idle.Reset(PortIdleTimeout)
	}
	return n, err
}

// CloseWrite half-closes (the server in the computer reads EOF).
func (c *meteredConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *meteredConn) Close() error {
	err := c.Conn.Close()
	c.closeOnce.Do(func() {
		c.release()
		c.log.Info("port connection closed", "bytes_in", c.in.Load(), "bytes_out", c.out.Load(),
			"ms", time.Since(c.start).Milliseconds(), "idle_timeout", c.idled.Load())
	})
	return err
}
