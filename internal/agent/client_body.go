package agent

import (
	"context"
	"io"

	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
)

// sendBody streams r to the agent as the data of call id (ch: its
// replies), then the data's end (an abort unless r ended cleanly), and
// returns the agent's reply and how reading r ended (io.EOF: cleanly).
// refused: the agent answered before the end (it refused the call, with
// f); nothing more was sent then.
func (c *Client) sendBody(ctx context.Context, id uint32, ch chan protocol.Frame, r io.Reader) (f protocol.Frame, refused bool, readErr error, err error) {
	buf := make([]byte, protocol.ChunkSize)
	for readErr == nil {
		select {
		case f := <-ch: // refused early (bad path, hostile entry, limit, no space)
			return f, true, nil, nil
		default:
		}
		if readErr = ctx.Err(); readErr != nil {
			break
		}
		var n int
		n, readErr = fill(r, buf)
		if n > 0 {
			if err := c.send(protocol.KindData, id, buf[:n]); err != nil {
				return protocol.Frame{}, false, readErr, err
			}
		}
	}
	var abort []byte
	if readErr != io.EOF {
		abort = []byte("abort")
	}
	if err := c.send(protocol.KindDataEnd, id, abort); err != nil {
		return protocol.Frame{}, false, readErr, err
	}
	f, err = c.next(context.WithoutCancel(ctx), ch)
	return f, false, readErr, err
}

// fill reads into buf until it is full (nil), r ends (io.EOF), or r fails.
// Unlike io.ReadFull it tells a short last read from r's own
// io.ErrUnexpectedEOF: an HTTP body or a multipart part cut before its end
// fails with it, and must not be taken for the whole upload.
func fill(r io.Reader, buf []byte) (n int, err error) {
	for n < len(buf) && err == nil {
		var m int
		m, err = r.Read(buf[n:])
		n += m
	}
	return n, err
}
