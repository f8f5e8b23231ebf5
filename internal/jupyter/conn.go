package jupyter

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// Bounds of a connection's outgoing queue: a client that falls this far
// behind the kernel is disconnected with a reason, not silently skipped.
const (
	connQueue      = 4096
	connQueueBytes = 64 << 20
	writeTimeout   = 30 * time.Second
)

// conn is one WebSocket connection to a kernel. Messages for it queue
// here, so that one slow client never holds the kernel or the others up.
type conn struct {
	ws     *websocket.Conn
	out    chan kernelFrame
	queued atomic.Int64 // bytes in out
	limit  int64        // bound of queued
	v1     bool         // speaks v1.kernel.websocket.jupyter.org
	once   sync.Once
	done   chan struct{}
	// closeCode and closeReason are set by kill before done closes.
	closeCode   websocket.StatusCode
	closeReason string
}

func newConn(ws *websocket.Conn, limit int64) *conn {
	return &conn{ws: ws, out: make(chan kernelFrame, connQueue), limit: limit, done: make(chan struct{})}
}

// enqueue queues f without blocking; a full queue closes the connection.
func (c *conn) enqueue(f kernelFrame) {
	n := int64(len(f.data))
	if c.queued.Add(n) > c.limit {
		c.queued.Add(-n)
		c.overflow()
		return
	}
	select {
	case c.out <- f:
	case <-c.done:
		c.queued.Add(-n)
	default:
		c.queued.Add(-n)
		c.overflow()
	}
}

func (c *conn) overflow() {
	c.kill(websocket.StatusPolicyViolation, fmt.Sprintf("client too slow: %d messages or %d KiB of kernel output queued; reconnect",
		connQueue, c.limit>>10))
}

// writeLoop sends queued messages until the connection ends, then closes
// it with the reason kill gave: after the message being written, so that
// a client that is merely slow still reads why (a stalled one gets the
// close once writeTimeout ends that write).
func (c *conn) writeLoop() {
	defer func() { c.ws.Close(c.closeCode, c.closeReason) }()
	for {
		select {
		case <-c.done:
			return
		default:
		}
		select {
		case <-c.done:
			return
		case f := <-c.out:
			c.queued.Add(-int64(len(f.data)))
			ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
			typ, data := f.typ, f.data
			if c.v1 {
				typ, data = websocket.MessageBinary, encodeV1(f.msg)
			}
			err := c.ws.Write(ctx, typ, data)
			cancel()
			if err != nil {
				c.kill(websocket.StatusGoingAway, "write failed")
				return
			}
		}
	}
}

// kill ends the connection once; it never blocks (writeLoop closes).
func (c *conn) kill(code websocket.StatusCode, reason string) {
	c.once.Do(func() {
		c.closeCode, c.closeReason = code, truncate(reason, 120)
		close(c.done)
	})
}
