package jupyter

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/coder/websocket"

	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/log"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// channels serves GET /api/kernels/{id}/channels: the WebSocket that
// carries every channel of the kernel: jupyter_server's legacy JSON and
// binary frames, or the v1.kernel.websocket.jupyter.org protocol when the
// client offers it (jupyter_server 1.23 and 2.x do).
func (s *Server) channels(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	k, err := s.kernelOf(r, p)
	if err != nil {
		return err
	}
	if n, ok := k.reserve(); !ok {
		return fmt.Errorf("%w: the kernel already has %d connections", errTooMany, n)
	}
	noDelay(r.Context())
	limit := s.queueBytes.Load()
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled,
		Subprotocols: []string{SubprotocolV1}})
	if err != nil {
		k.unreserve()
		return nil // Accept has answered
	}
	ws.SetReadLimit(maxClientMessage)
	c := newConn(ws, limit)
	c.v1 = ws.Subprotocol() == SubprotocolV1
	if !k.attach(c) {
		ws.Close(websocket.StatusGoingAway, "the kernel is gone")
		return nil
	}
	defer k.detach(c)
	go c.writeLoop()
	ctx := context.WithoutCancel(r.Context())
	warned := false
	for {
		typ, data, err := ws.Read(ctx)
		if err != nil {
			c.kill(websocket.StatusNormalClosure, "")
			return nil
		}
		cf, err := decodeClient(typ, data, c.v1)
		if err != nil {
			log.From(ctx).DebugContext(ctx, "jupyter: ignored a client message", "err", truncate(err.Error(), 200))
			continue
		}
		if cf.noChannel && !warned {
			warned = true
			log.From(ctx).WarnContext(ctx, "jupyter: a client message names no channel; assuming shell, as jupyter_server does (later ones are not logged)")
		}
		m, msgID := cf.msg, cf.msgID
		if cf.refused != "" {
			// Never sent to the kernel: a request is answered with why, and
			// a connection that sends anything else so is closed with why.
			log.From(ctx).InfoContext(ctx, "jupyter: refused a client message", "reason", cf.refused)
			if !c.answer(errorReplies(m, refusedEName, cf.refused)) {
				c.kill(websocket.StatusPolicyViolation, cf.refused)
				return nil
			}
			continue
		}
		if err := k.send(ctx, c, m, msgID); err != nil {
			if errors.Is(err, errDead) {
				// The client saw the "dead" status; a restart revives the
				// kernel. Its request is answered, so that it does not wait.
				c.answer(errorReplies(m, deadEName, deadEValue))
				continue
			}
			log.From(ctx).DebugContext(ctx, "jupyter: relay a client message", "err", err)
		}
	}
}

// answer queues replies of the gateway's own to a client's request; it
// reports whether there were any.
func (c *conn) answer(replies []sandbox.KernelMessage) bool {
	for _, r := range replies {
		if f, err := encodeKernel(r); err == nil {
			c.enqueue(f)
		}
	}
	return len(replies) > 0
}

type connKey struct{}

// ConnContext keeps each connection in its requests' context (set it as
// http.Server.ConnContext), so that the channels WebSocket can set
// TCP_NODELAY on it: with Nagle's algorithm a reply waits ~40 ms for the
// client's delayed ACK, which is most of jupyter_server's round trip.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// noDelay sets TCP_NODELAY on the request's connection (Go already does
// for the TCP connections it accepts; this states it where it matters).
func noDelay(ctx context.Context) {
	if tc, ok := ctx.Value(connKey{}).(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
}
