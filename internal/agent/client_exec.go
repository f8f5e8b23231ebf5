package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"golang.org/x/sys/unix"
)

// ExecIO connects a process's standard streams. Nil Stdin means /dev/null;
// nil Stdout or Stderr discards. Writers are called from the caller's
// goroutine, never concurrently.
type ExecIO struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Started, when set, is called once the process runs, with its pid
	// inside the computer.
	Started func(pid int)
}

// Exec runs a process and waits for it. Cancelling ctx kills the process and
// all its descendants; Exec still returns only after the agent has reaped
// it, so capacity is never released early.
func (c *Client) Exec(ctx context.Context, req ExecStart, sio ExecIO) (ExitStatus, error) {
	req.Stdin = sio.Stdin != nil
	id, ch := c.open()
	defer c.release(id)
	if err := c.sendJSON(KindExec, id, req); err != nil {
		return ExitStatus{}, err
	}
	acks := make(chan struct{}, stdinWindow)
	stop := make(chan struct{})
	defer close(stop)
	if sio.Stdin != nil {
		go c.feed(id, sio.Stdin, acks, stop)
	}
	cn := &canceller{send: func() { c.sendJSON(KindSignal, id, SignalRequest{Signal: int(unix.SIGKILL)}) }}
	for {
		f, err := c.nextOrCancel(ctx, ch, cn)
		if err != nil {
			return ExitStatus{}, err
		}
		switch f.Kind {
		case KindStarted:
			var st Started
			if json.Unmarshal(f.Payload, &st) == nil && sio.Started != nil {
				sio.Started(st.Pid)
			}
		case KindStdout:
			if sio.Stdout != nil {
				sio.Stdout.Write(f.Payload)
			}
		case KindStderr:
			if sio.Stderr != nil {
				sio.Stderr.Write(f.Payload)
			}
		case KindStdinAck:
			select {
			case acks <- struct{}{}:
			default:
			}
		case KindExit, KindError:
			var st ExitStatus
			err := decodeReply(f, &st)
			if cn.done {
				// Cancelled: whatever the agent says last (an exit, or a
				// start that failed because the kill won the race) the
				// caller's answer is its own cancellation.
				err = ctx.Err()
			}
			return st, err
		default:
			return ExitStatus{}, fmt.Errorf("%w: unexpected frame kind %d in a process stream", ErrInternal, f.Kind)
		}
	}
}

// feed copies stdin to the agent, keeping at most stdinWindow chunks
// unacknowledged so the agent never has to buffer or block on it.
func (c *Client) feed(id uint32, r io.Reader, acks <-chan struct{}, stop <-chan struct{}) {
	buf := make([]byte, ChunkSize)
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
			if c.send(KindStdin, id, buf[:n]) != nil {
				return
			}
			inflight++
		}
		if err != nil {
			c.send(KindStdinClose, id, nil)
			return
		}
		select {
		case <-stop:
			return
		default:
		}
	}
}
