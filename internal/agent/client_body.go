package agent

import (
	"context"
	"errors"
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
		n, readErr = io.ReadFull(r, buf)
		if n > 0 {
			if err := c.send(protocol.KindData, id, buf[:n]); err != nil {
				return protocol.Frame{}, false, readErr, err
			}
		}
		if errors.Is(readErr, io.EOF) || errors.Is(readErr, io.ErrUnexpectedEOF) {
			readErr = io.EOF
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
