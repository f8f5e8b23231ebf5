package agent

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// ListPorts lists the listening TCP sockets of the computer.
func (c *Client) ListPorts(ctx context.Context) (sandbox.PortList, error) {
	var l protocol.PortList
	if err := c.call(ctx, protocol.KindPortList, struct{}{}, &l); err != nil {
		return sandbox.PortList{}, err
	}
	out := sandbox.PortList{Ports: make([]sandbox.Listener, 0, len(l.Ports)), Truncated: l.Truncated}
	for _, p := range l.Ports {
		out.Ports = append(out.Ports, sandbox.Listener(p))
	}
	return out, nil
}

// DialPort connects to 127.0.0.1:port inside the computer: the agent dials
// in the computer's network namespace and the bytes travel on a stream of
// the control channel (protocol/messages_ports.go), within a window each
// way, so a slow reader on either side never blocks the channel.
func (c *Client) DialPort(ctx context.Context, port int) (net.Conn, error) {
	pc := &hostPortConn{c: c, port: port, credit: protocol.PortWindow, opened: make(chan error, 1),
		readable: make(chan struct{}, 1), writable: make(chan struct{}, 1)}
	pc.id = c.register(&stream{gone: make(chan struct{}), deliver: pc.deliver})
	if err := c.sendJSON(protocol.KindPortOpen, pc.id, protocol.PortOpen{Port: port}); err != nil {
		c.release(pc.id)
		return nil, err
	}
	select {
	case err := <-pc.opened:
		if err != nil {
			c.release(pc.id)
			return nil, err
		}
		return pc, nil
	case <-c.done:
		c.release(pc.id)
		return nil, c.gone()
	case <-ctx.Done():
		c.send(protocol.KindPortClose, pc.id, nil)
		c.release(pc.id)
		return nil, ctx.Err()
	}
}

// hostPortConn is the host's end of a relayed connection: a net.Conn.
type hostPortConn struct {
	c    *Client
	id   uint32
	port int

	opened   chan error    // the agent's answer to the open
	readable chan struct{} // signalled on data, end, close, deadline change
	writable chan struct{} // signalled on ack, end, close, deadline change

	wmu sync.Mutex // one Write at a time

	mu        sync.Mutex
	open      bool     // the agent answered the open
	rq        [][]byte // received, not yet read
	rbytes    int64
	credit    int64 // bytes we may still send
	eof       bool  // the agent sent KindPortEOF
	ended     bool  // the agent ended the stream (or the channel is gone)
	endErr    error
	closed    bool
	wclosed   bool
	rdl, wdl  time.Time
	closeOnce sync.Once
}

func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// deliver takes the agent's frames from the read loop; it never blocks.
func (pc *hostPortConn) deliver(f protocol.Frame) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if !pc.open {
		switch f.Kind {
		case protocol.KindOK:
			pc.open = true
			pc.opened <- nil
		case protocol.KindError:
			pc.open = true
			err := decodeReply(f, nil)
			if errors.Is(err, protocol.ErrPortRefused) {
				err = &kindError{kind: sandbox.ErrPortRefused, err: err}
			}
			pc.opened <- err
		}
		return
	}
	switch f.Kind {
	case protocol.KindPortData:
		if pc.ended || pc.closed {
			return
		}
		if pc.rbytes+int64(len(f.Payload)) > protocol.PortWindow {
			pc.endLocked(fmt.Errorf("%w: the agent sent more than the port window", protocol.ErrInternal))
			go pc.c.send(protocol.KindPortClose, pc.id, nil)
			return
		}
		pc.rq = append(pc.rq, f.Payload)
		pc.rbytes += int64(len(f.Payload))
		notify(pc.readable)
	case protocol.KindPortAck:
		if len(f.Payload) == 4 {
			pc.credit += int64(binary.BigEndian.Uint32(f.Payload))
			notify(pc.writable)
		}
	case protocol.KindPortEOF:
		pc.eof = true
		notify(pc.readable)
	case protocol.KindPortClose:
		var end protocol.PortEnd
		_ = json.Unmarshal(f.Payload, &end)
		var err error
		if end.Error != "" {
			err = fmt.Errorf("port %d: the connection in the computer ended: %s", pc.port, clipString(end.Error, 200))
		}
		pc.endLocked(err)
	}
}

// endLocked records the stream's end (under mu).
func (pc *hostPortConn) endLocked(err error) {
	if pc.ended {
		return
	}
	pc.ended, pc.endErr = true, err
	go pc.c.release(pc.id)
	notify(pc.readable)
	notify(pc.writable)
}

// wait waits for ch, the deadline dl, or the channel's end.
func (pc *hostPortConn) wait(ch chan struct{}, dl time.Time) error {
	var timeout <-chan time.Time
	if !dl.IsZero() {
		d := time.Until(dl)
		if d <= 0 {
			return os.ErrDeadlineExceeded
		}
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-ch:
	case <-pc.c.done:
		pc.mu.Lock()
		pc.endLocked(pc.c.gone())
		pc.mu.Unlock()
	case <-timeout:
		return os.ErrDeadlineExceeded
	}
	return nil
}

func (pc *hostPortConn) Read(p []byte) (int, error) {
	for {
		pc.mu.Lock()
		switch {
		case pc.closed:
			pc.mu.Unlock()
			return 0, net.ErrClosed
		case len(pc.rq) > 0:
			n := copy(p, pc.rq[0])
			if pc.rq[0] = pc.rq[0][n:]; len(pc.rq[0]) == 0 {
				pc.rq[0] = nil
				pc.rq = pc.rq[1:]
			}
			pc.rbytes -= int64(n)
			ended := pc.ended
			pc.mu.Unlock()
			if !ended && n > 0 {
				var ack [4]byte
				binary.BigEndian.PutUint32(ack[:], uint32(n))
				pc.c.send(protocol.KindPortAck, pc.id, ack[:])
			}
			return n, nil
		case pc.eof:
			pc.mu.Unlock()
			return 0, io.EOF
		case pc.ended:
			err := pc.endErr
			pc.mu.Unlock()
			if err == nil {
				err = io.EOF
			}
			return 0, err
		}
		dl := pc.rdl
		pc.mu.Unlock()
		if err := pc.wait(pc.readable, dl); err != nil {
			return 0, err
		}
	}
}

func (pc *hostPortConn) Write(p []byte) (int, error) {
	pc.wmu.Lock()
	defer pc.wmu.Unlock()
	total := 0
	for len(p) > 0 {
		pc.mu.Lock()
		switch {
		case pc.closed:
			pc.mu.Unlock()
			return total, net.ErrClosed
		case pc.wclosed:
			pc.mu.Unlock()
			return total, fmt.Errorf("port %d: write after CloseWrite", pc.port)
		case pc.ended:
			err := pc.endErr
			pc.mu.Unlock()
			if err == nil {
				err = fmt.Errorf("port %d: the connection in the computer was closed", pc.port)
			}
			return total, err
		}
		credit, dl := pc.credit, pc.wdl
		if credit <= 0 {
			pc.mu.Unlock()
			if err := pc.wait(pc.writable, dl); err != nil {
				return total, err
			}
			continue
		}
		n := min(int64(len(p)), protocol.ChunkSize, credit)
		pc.credit -= n
		pc.mu.Unlock()
		if err := pc.c.send(protocol.KindPortData, pc.id, p[:n]); err != nil {
			return total, err
		}
		total += int(n)
		p = p[n:]
	}
	return total, nil
}

// CloseWrite half-closes: the server in the computer reads EOF.
func (pc *hostPortConn) CloseWrite() error {
	pc.wmu.Lock()
	defer pc.wmu.Unlock()
	pc.mu.Lock()
	if pc.wclosed || pc.closed || pc.ended {
		pc.mu.Unlock()
		return nil
	}
	pc.wclosed = true
	pc.mu.Unlock()
	return pc.c.send(protocol.KindPortEOF, pc.id, nil)
}

// Close drops the connection (the agent closes its socket).
func (pc *hostPortConn) Close() error {
	pc.closeOnce.Do(func() {
		pc.mu.Lock()
		pc.closed = true
		ended := pc.ended
		pc.rq, pc.rbytes = nil, 0
		notify(pc.readable)
		notify(pc.writable)
		pc.mu.Unlock()
		if !ended {
			pc.c.send(protocol.KindPortClose, pc.id, nil)
			pc.c.release(pc.id)
		}
	})
	return nil
}

func (pc *hostPortConn) LocalAddr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }
func (pc *hostPortConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: pc.port}
}

func (pc *hostPortConn) SetDeadline(t time.Time) error {
	pc.SetReadDeadline(t)
	return pc.SetWriteDeadline(t)
}

func (pc *hostPortConn) SetReadDeadline(t time.Time) error {
	pc.mu.Lock()
	pc.rdl = t
	pc.mu.Unlock()
	notify(pc.readable)
	return nil
}

func (pc *hostPortConn) SetWriteDeadline(t time.Time) error {
	pc.mu.Lock()
	pc.wdl = t
	pc.mu.Unlock()
	notify(pc.writable)
	return nil
}
