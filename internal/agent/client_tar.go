package agent

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// Move renames a file or directory inside the workspace.
func (c *Client) Move(ctx context.Context, from, to string, overwrite bool) error {
	if err := errors.Join(sandbox.CheckPath(from), sandbox.CheckPath(to)); err != nil {
		return err
	}
	return c.call(ctx, protocol.KindMove, protocol.MoveRequest{From: from, To: to, Overwrite: overwrite}, nil)
}

// WriteTar streams the tar archive r to the agent, which extracts it as
// it comes. A refusal (a hostile entry, a limit) ends the upload at once:
// the rest of r is not read.
func (c *Client) WriteTar(ctx context.Context, req sandbox.TarWrite, r io.Reader) (sandbox.TarDone, error) {
	id, ch := c.open()
	defer c.release(id)
	if err := c.sendJSON(protocol.KindTarWrite, id, protocol.TarWrite(req)); err != nil {
		return sandbox.TarDone{}, err
	}
	f, refused, readErr, err := c.sendBody(ctx, id, ch, r)
	if refused {
		c.send(protocol.KindDataEnd, id, []byte("abort"))
		return sandbox.TarDone{}, decodeReply(f, nil)
	}
	if err != nil {
		return sandbox.TarDone{}, err
	}
	var done protocol.TarDone
	err = decodeReply(f, &done)
	if readErr != io.EOF && (err == nil || errors.Is(err, protocol.ErrInvalid)) {
		// the agent's answer is its abort (or it was done): the reason is ours
		return sandbox.TarDone{}, fmt.Errorf("write tar into %s: %w", req.Path, readErr)
	}
	return sandbox.TarDone(done), err
}

// ReadTar copies a directory as a tar archive to w. A failure of w (or
// ctx's end) stops the agent's walk.
func (c *Client) ReadTar(ctx context.Context, req sandbox.TarRead, w io.Writer) (sandbox.TarDone, error) {
	id, ch := c.open()
	defer c.release(id)
	if err := c.sendJSON(protocol.KindTarRead, id, protocol.TarRead(req)); err != nil {
		return sandbox.TarDone{}, err
	}
	for {
		f, err := c.next(ctx, ch)
		if err != nil {
			c.send(protocol.KindDataEnd, id, nil) // stop the walk
			return sandbox.TarDone{}, err
		}
		if f.Kind != protocol.KindData {
			var done protocol.TarDone
			if err := decodeReply(f, &done); err != nil {
				return sandbox.TarDone{}, err
			}
			return sandbox.TarDone(done), nil
		}
		_, werr := w.Write(f.Payload)
		protocol.Recycle(f)
		if werr != nil {
			c.send(protocol.KindDataEnd, id, nil)
			return sandbox.TarDone{}, werr
		}
	}
}
