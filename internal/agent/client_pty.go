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

// Terminal is a process on a terminal of the computer (sandbox.Terminal):
// an exec stream with protocol.ExecStart.Pty, read by a goroutine of its
// own from its start to its exit.
type Terminal struct {
	c      *Client
	id     uint32
	pid    int
	slots  chan struct{} // input chunks in flight (the stdin window)
	cancel context.CancelFunc
	done   chan struct{} // closed when st and err are final
	st     sandbox.ExitStatus
	err    error
}

var _ sandbox.Terminal = (*Terminal)(nil)

// OpenTerminal starts req on a new terminal and returns once it runs.
// Cancelling ctx hangs it up (see Terminal.Hangup).
func (c *Client) OpenTerminal(ctx context.Context, req sandbox.TerminalRequest, out io.Writer) (*Terminal, error) {
	if req.Cols < 0 || req.Rows < 0 || req.Cols > protocol.MaxPtySize || req.Rows > protocol.MaxPtySize {
		return nil, fmt.Errorf("%w: terminal size %dx%d: columns and rows must be between 1 and %d",
			sandbox.ErrInvalid, req.Cols, req.Rows, protocol.MaxPtySize)
	}
	id, ch := c.open()
	wire := wireExec(req.ExecRequest, true)
	wire.Pty = &protocol.PtySize{Cols: req.Cols, Rows: req.Rows}
	if err := c.sendJSON(protocol.KindExec, id, wire); err != nil {
		c.release(id)
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	t := &Terminal{c: c, id: id, slots: make(chan struct{}, stdinWindow), cancel: cancel, done: make(chan struct{})}
	started := make(chan struct{})
	go t.run(ctx, ch, out, started)
	select {
	case <-started:
		return t, nil
	case <-t.done:
		cancel()
		if t.err == nil {
			t.err = fmt.Errorf("%w: the terminal's process ended before it started", protocol.ErrInternal)
		}
		return nil, t.err
	}
}

// run reads the terminal's stream until its exit; a hangup (ctx) is
// sent once and the exit still awaited.
func (t *Terminal) run(ctx context.Context, ch chan protocol.Frame, out io.Writer, started chan struct{}) {
	defer close(t.done)
	defer t.c.release(t.id)
	defer t.cancel()
	cn := &canceller{send: func() { t.c.sendJSON(protocol.KindSignal, t.id, protocol.SignalRequest{Signal: int(unix.SIGHUP)}) }}
	for {
		f, err := t.c.nextOrCancel(ctx, ch, cn)
		if err != nil {
			t.err = err
			return
		}
		switch f.Kind {
		case protocol.KindStarted:
			var st protocol.Started
			json.Unmarshal(f.Payload, &st)
			t.pid = st.Pid
			close(started)
		case protocol.KindStdout, protocol.KindStderr:
			out.Write(f.Payload)
			protocol.Recycle(f)
		case protocol.KindStdinAck:
			select {
			case <-t.slots:
			default:
			}
		case protocol.KindExit, protocol.KindError:
			var st protocol.ExitStatus
			t.err = decodeReply(f, &st)
			t.st = exitStatus(st)
			return
		default:
			t.err = fmt.Errorf("%w: unexpected frame kind %d in a terminal stream", protocol.ErrInternal, f.Kind)
			return
		}
	}
}

// Pid is the main process's pid inside the computer.
func (t *Terminal) Pid() int { return t.pid }

// Input sends b to the terminal in chunks, at most stdinWindow of them
// unacknowledged.
func (t *Terminal) Input(ctx context.Context, b []byte) error {
	for len(b) > 0 {
		n := min(len(b), protocol.ChunkSize)
		select {
		case t.slots <- struct{}{}:
		case <-t.done:
			return fmt.Errorf("%w: the terminal ended", sandbox.ErrGone)
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := t.c.send(protocol.KindStdin, t.id, b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// Resize sets the terminal's size.
func (t *Terminal) Resize(cols, rows int) error {
	if cols < 1 || rows < 1 || cols > protocol.MaxPtySize || rows > protocol.MaxPtySize {
		return fmt.Errorf("%w: terminal size %dx%d: columns and rows must be between 1 and %d",
			sandbox.ErrInvalid, cols, rows, protocol.MaxPtySize)
	}
	select {
	case <-t.done:
		return nil
	default:
	}
	return t.c.sendJSON(protocol.KindPtyResize, t.id, protocol.PtySize{Cols: cols, Rows: rows})
}

// Hangup hangs the terminal up; Wait then returns once it ended.
func (t *Terminal) Hangup() { t.cancel() }

// Wait returns how the terminal's main process ended.
func (t *Terminal) Wait() (sandbox.ExitStatus, error) {
	<-t.done
	return t.st, t.err
}
