package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// WriteFile uploads r to req.Path. The file appears atomically when the
// upload completes; on any error the previous content is untouched.
func (c *Client) WriteFile(ctx context.Context, req FileWrite, r io.Reader) (Written, error) {
	id, ch := c.open()
	defer c.release(id)
	if err := c.sendJSON(KindFileWrite, id, req); err != nil {
		return Written{}, err
	}
	buf := make([]byte, ChunkSize)
	var readErr error
	for readErr == nil {
		var n int
		n, readErr = io.ReadFull(r, buf)
		if n > 0 {
			if err := c.send(KindData, id, buf[:n]); err != nil {
				return Written{}, err
			}
		}
		if errors.Is(readErr, io.EOF) || errors.Is(readErr, io.ErrUnexpectedEOF) {
			readErr = io.EOF
			break
		}
		select {
		case f := <-ch: // the agent refused early (bad path, no space...)
			return Written{}, decodeReply(f, nil)
		default:
		}
		if ctx.Err() != nil {
			readErr = ctx.Err()
		}
	}
	var abort []byte
	if readErr != io.EOF {
		abort = []byte("abort")
	}
	if err := c.send(KindDataEnd, id, abort); err != nil {
		return Written{}, err
	}
	f, err := c.next(context.WithoutCancel(ctx), ch)
	if err != nil {
		return Written{}, err
	}
	if readErr != io.EOF {
		return Written{}, fmt.Errorf("write %s: %w", req.Path, readErr)
	}
	var w Written
	return w, decodeReply(f, &w)
}

// ReadFile copies at most req.Limit bytes of a regular file to w.
func (c *Client) ReadFile(ctx context.Context, req FileRead, w io.Writer) (DataEnd, error) {
	id, ch := c.open()
	defer c.release(id)
	if err := c.sendJSON(KindFileRead, id, req); err != nil {
		return DataEnd{}, err
	}
	var got int64
	var werr error
	for {
		f, err := c.next(context.WithoutCancel(ctx), ch)
		if err != nil {
			return DataEnd{}, err
		}
		if f.Kind != KindData {
			var end DataEnd
			if err := decodeReply(f, &end); err != nil {
				return DataEnd{}, err
			}
			return end, werr
		}
		got += int64(len(f.Payload))
		if req.Limit > 0 && got > req.Limit {
			return DataEnd{}, fmt.Errorf("%w: agent sent more than the %d bytes asked for", ErrInternal, req.Limit)
		}
		if werr == nil {
			_, werr = w.Write(f.Payload)
		}
	}
}
