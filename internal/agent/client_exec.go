package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"golang.org/x/sys/unix"

	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// Exec runs a process and waits for it. Cancelling ctx kills the process and
// all its descendants; Exec still returns only after the agent has reaped
// it, so capacity is never released early.
func (c *Client) Exec(ctx context.Context, req sandbox.ExecRequest, sio sandbox.ExecIO) (sandbox.ExitStatus, error) {
	id, ch := c.open()
	defer c.release(id)
	if err := c.sendJSON(protocol.KindExec, id, wireExec(req, sio.Stdin != nil)); err != nil {
		return sandbox.ExitStatus{}, err
	}
	acks := make(chan struct{}, stdinWindow)
	stop := make(chan struct{})
	defer close(stop)
	if sio.Stdin != nil {
		go c.feed(id, sio.Stdin, acks, stop)
	}
	cn := &canceller{send: func() { c.sendJSON(protocol.KindSignal, id, protocol.SignalRequest{Signal: int(unix.SIGKILL)}) }}
	for {
		f, err := c.nextOrCancel(ctx, ch, cn)
		if err != nil {
			return sandbox.ExitStatus{}, err
		}
		switch f.Kind {
		case protocol.KindStarted:
			var st protocol.Started
			if json.Unmarshal(f.Payload, &st) == nil && sio.Started != nil {
				sio.Started(st.Pid)
			}
		case protocol.KindStdout:
			if sio.Stdout != nil {
				sio.Stdout.Write(f.Payload)
			}
			protocol.Recycle(f)
		case protocol.KindStderr:
			if sio.Stderr != nil {
				sio.Stderr.Write(f.Payload)
			}
			protocol.Recycle(f)
		case protocol.KindStdinAck:
			select {
			case acks <- struct{}{}:
			default:
			}
		case protocol.KindExit, protocol.KindError:
			var st protocol.ExitStatus
			err := decodeReply(f, &st)
			if cn.done {
				// Cancelled: whatever the agent says last (an exit, or a
				// start that failed because the kill won the race) the
				// caller's answer is its own cancellation.
				err = ctx.Err()
			}
			return exitStatus(st), err
		default:
			return sandbox.ExitStatus{}, fmt.Errorf("%w: unexpected frame kind %d in a process stream", protocol.ErrInternal, f.Kind)
		}
	}
}

// feed copies stdin to the agent, keeping at most stdinWindow chunks
// unacknowledged so the agent never has to buffer or block on it.
func (c *Client) feed(id uint32, r io.Reader, acks <-chan struct{}, stop <-chan struct{}) {
	buf := make([]byte, protocol.ChunkSize)
	inflight := 0
	for {
		n, err := r.Read(buf)
		if n > 0 {
			for inflight >= stdinWindow {
				select {
				case <-acks:
					inflight--
				case <-stop:
					return
				}
			}
			if c.send(protocol.KindStdin, id, buf[:n]) != nil {
				return
			}
			inflight++
		}
		if err != nil {
			c.send(protocol.KindStdinClose, id, nil)
			return
		}
		select {
		case <-stop:
			return
		default:
		}
	}
}
