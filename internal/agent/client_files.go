package agent

import (
	"context"
	"fmt"
	"io"

	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// WriteFile uploads r to req.Path. The file appears atomically when the
// upload completes; on any error the previous content is untouched.
func (c *Client) WriteFile(ctx context.Context, req sandbox.FileWrite, r io.Reader) (sandbox.Written, error) {
	id, ch := c.open()
	defer c.release(id)
	if err := c.sendJSON(protocol.KindFileWrite, id, protocol.FileWrite(req)); err != nil {
		return sandbox.Written{}, err
	}
	f, refused, readErr, err := c.sendBody(ctx, id, ch, r)
	if refused {
		return sandbox.Written{}, decodeReply(f, nil)
	}
	if err != nil {
		return sandbox.Written{}, err
	}
	if readErr != io.EOF {
		return sandbox.Written{}, fmt.Errorf("write %s: %w", req.Path, readErr)
	}
	var w protocol.Written
	err = decodeReply(f, &w)
	return sandbox.Written(w), err
}

// ReadFile copies at most req.Limit bytes of a regular file to w.
func (c *Client) ReadFile(ctx context.Context, req sandbox.FileRead, w io.Writer) (sandbox.DataEnd, error) {
	id, ch := c.open()
	defer c.release(id)
	if err := c.sendJSON(protocol.KindFileRead, id, protocol.FileRead(req)); err != nil {
		return sandbox.DataEnd{}, err
	}
	var got int64
	var werr error
	for {
		f, err := c.next(context.WithoutCancel(ctx), ch)
		if err != nil {
			return sandbox.DataEnd{}, err
		}
		if f.Kind != protocol.KindData {
			var end protocol.DataEnd
			if err := decodeReply(f, &end); err != nil {
				return sandbox.DataEnd{}, err
			}
			return sandbox.DataEnd(end), werr
		}
		got += int64(len(f.Payload))
		if req.Limit > 0 && got > req.Limit {
			return sandbox.DataEnd{}, fmt.Errorf("%w: agent sent more than the %d bytes asked for", protocol.ErrInternal, req.Limit)
		}
		if werr == nil {
			_, werr = w.Write(f.Payload)
		}
		protocol.Recycle(f)
	}
}
