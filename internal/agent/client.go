package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// Client is the host side of the control channel. It multiplexes any number
// of concurrent requests over one connection. Frames from the agent are
// hostile input: each is bounded by ReadFrame, and frames for unknown
// streams are dropped.
type Client struct {
	conn io.ReadWriteCloser

	writeMu sync.Mutex

	mu      sync.Mutex
	streams map[uint32]*stream
	nextID  uint32
	err     error
	done    chan struct{}
}

// NewClient starts reading frames from conn.
func NewClient(conn io.ReadWriteCloser) *Client {
	c := &Client{conn: conn, streams: make(map[uint32]*stream), done: make(chan struct{})}
	go c.readLoop()
	return c
}

// Done is closed when the channel is gone.
func (c *Client) Done() <-chan struct{} { return c.done }

// Close closes the channel; pending requests fail with sandbox.ErrGone.
func (c *Client) Close() error { return c.conn.Close() }

func (c *Client) readLoop() {
	var err error
	for {
		var f protocol.Frame
		f, err = protocol.ReadFrame(c.conn)
		if err != nil {
			break
		}
		c.mu.Lock()
		st := c.streams[f.ID]
		c.mu.Unlock()
		if st != nil && st.deliver != nil {
			st.deliver(f) // never blocks
		} else if st != nil {
			select {
			case st.ch <- f:
			case <-st.gone: // released meanwhile: nobody will read it
			}
		}
	}
	c.mu.Lock()
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		err = sandbox.ErrGone
	} else {
		err = fmt.Errorf("%w: %v", sandbox.ErrGone, err)
	}
	c.err = err
	c.mu.Unlock()
	close(c.done)
	c.conn.Close()
}

// stream is one request's queue of frames; gone is closed when the request
// no longer reads it. A stream with deliver (a kernel relay) gets its
// frames through it instead, from the read loop: it must not block.
type stream struct {
	ch      chan protocol.Frame
	gone    chan struct{}
	deliver func(protocol.Frame)
}

func (c *Client) open() (uint32, chan protocol.Frame) {
	st := &stream{ch: make(chan protocol.Frame, 16), gone: make(chan struct{})}
	return c.register(st), st.ch
}

func (c *Client) register(st *stream) uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextID++
	if c.nextID == 0 {
		c.nextID = 1
	}
	c.streams[c.nextID] = st
	return c.nextID
}

func (c *Client) release(id uint32) {
	c.mu.Lock()
	if st := c.streams[id]; st != nil {
		close(st.gone)
		delete(c.streams, id)
	}
	c.mu.Unlock()
}

func (c *Client) gone() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	return sandbox.ErrGone
}

func (c *Client) send(kind protocol.Kind, id uint32, payload []byte) error {
	buf, err := protocol.AppendFrame(nil, protocol.Frame{Kind: kind, ID: id, Payload: payload})
	if errors.Is(err, protocol.ErrFrameTooLarge) {
		// A request is made of the caller's input: too much of it is the
		// caller's error (413 at the edge), not the channel's.
		return hostError(fmt.Errorf("%w: the request is %d bytes, more than the %d the computer's control channel takes",
			protocol.ErrTooLarge, len(payload), protocol.MaxPayload))
	}
	if err != nil {
		return err
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if _, err := c.conn.Write(buf); err != nil {
		return c.gone()
	}
	return nil
}

func (c *Client) sendJSON(kind protocol.Kind, id uint32, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.send(kind, id, b)
}

// next waits for the stream's next frame.
func (c *Client) next(ctx context.Context, ch chan protocol.Frame) (protocol.Frame, error) {
	select {
	case f := <-ch:
		return f, nil
	case <-c.done:
		select { // frames queued before the channel closed still count
		case f := <-ch:
			return f, nil
		default:
		}
		return protocol.Frame{}, c.gone()
	case <-ctx.Done():
		return protocol.Frame{}, ctx.Err()
	}
}

// canceller sends a stream's cancel request at most once.
type canceller struct {
	done bool
	send func()
}

func (c *canceller) cancel() {
	if !c.done {
		c.done = true
		c.send()
	}
}

// nextOrCancel waits for a stream's next frame. When ctx ends it cancels
// the stream (once) and keeps waiting: the caller still reads the agent's
// final frame, so it returns only when the agent has finished the work.
func (c *Client) nextOrCancel(ctx context.Context, ch chan protocol.Frame, cn *canceller) (protocol.Frame, error) {
	done := ctx.Done()
	if cn.done {
		done = nil
	}
	for {
		select {
		case f := <-ch:
			return f, nil
		case <-c.done:
			select {
			case f := <-ch:
				return f, nil
			default:
				return protocol.Frame{}, c.gone()
			}
		case <-done:
			done = nil
			cn.cancel()
		}
	}
}

// call sends one JSON request and decodes the single reply.
func (c *Client) call(ctx context.Context, kind protocol.Kind, req, reply any) error {
	id, ch := c.open()
	defer c.release(id)
	if err := c.sendJSON(kind, id, req); err != nil {
		return err
	}
	f, err := c.next(ctx, ch)
	if err != nil {
		return err
	}
	return decodeReply(f, reply)
}

func decodeReply(f protocol.Frame, reply any) error {
	switch f.Kind {
	case protocol.KindError:
		var w protocol.WireError
		if err := json.Unmarshal(f.Payload, &w); err != nil {
			return fmt.Errorf("%w: malformed error from agent", protocol.ErrInternal)
		}
		return fromWire(w)
	case protocol.KindOK, protocol.KindExit, protocol.KindDataEnd, protocol.KindReady:
		if reply == nil {
			return nil
		}
		if err := json.Unmarshal(f.Payload, reply); err != nil {
			return fmt.Errorf("%w: malformed reply from agent: %v", protocol.ErrInternal, err)
		}
		return nil
	}
	return fmt.Errorf("%w: unexpected frame kind %d", protocol.ErrInternal, f.Kind)
}

// Ping checks that the agent answers.
func (c *Client) Ping(ctx context.Context) error {
	id, ch := c.open()
	defer c.release(id)
	if err := c.send(protocol.KindPing, id, nil); err != nil {
		return err
	}
	f, err := c.next(ctx, ch)
	if err != nil {
		return err
	}
	return decodeReply(f, nil)
}

// Stat describes one path.
func (c *Client) Stat(ctx context.Context, path string) (sandbox.FileInfo, error) {
	var fi protocol.FileInfo
	err := c.callPath(ctx, protocol.KindStat, protocol.PathRequest{Path: path}, &fi)
	return sandbox.FileInfo(fi), err
}

// List lists a directory.
func (c *Client) List(ctx context.Context, path string) (sandbox.Listing, error) {
	var l protocol.Listing
	err := c.callPath(ctx, protocol.KindList, protocol.PathRequest{Path: path}, &l)
	return listing(l), err
}

// Mkdir creates a directory (and its parents when parents is set).
func (c *Client) Mkdir(ctx context.Context, path string, parents bool) error {
	return c.callPath(ctx, protocol.KindMkdir, protocol.PathRequest{Path: path, Parents: parents}, nil)
}

// Remove removes a file or an empty directory, or a whole tree when recursive.
func (c *Client) Remove(ctx context.Context, path string, recursive bool) error {
	return c.callPath(ctx, protocol.KindRemove, protocol.PathRequest{Path: path, Recursive: recursive}, nil)
}

// callPath is call for a request on one path, refused here when the agent
// would refuse the path (too long, a NUL byte): a path of a megabyte would
// not fit a frame.
func (c *Client) callPath(ctx context.Context, kind protocol.Kind, req protocol.PathRequest, reply any) error {
	if err := sandbox.CheckPath(req.Path); err != nil {
		return err
	}
	return c.call(ctx, kind, req, reply)
}
