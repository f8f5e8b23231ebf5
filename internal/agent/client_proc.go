package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// StartProcess starts a background process (see sandbox.Background).
func (c *Client) StartProcess(ctx context.Context, req sandbox.ProcessStart) (sandbox.ProcessInfo, error) {
	var info protocol.ProcInfo
	err := c.call(ctx, protocol.KindProcStart, wireProcStart(req), &info)
	return processInfo(info), err
}

// ListProcesses lists the background processes the agent holds, oldest first.
func (c *Client) ListProcesses(ctx context.Context) ([]sandbox.ProcessInfo, error) {
	var l protocol.ProcList
	if err := c.call(ctx, protocol.KindProcList, struct{}{}, &l); err != nil {
		return nil, err
	}
	out := make([]sandbox.ProcessInfo, len(l.Procs))
	for i, p := range l.Procs {
		out[i] = processInfo(p)
	}
	return out, nil
}

// GetProcess describes one background process.
func (c *Client) GetProcess(ctx context.Context, id string) (sandbox.ProcessInfo, error) {
	var info protocol.ProcInfo
	err := c.call(ctx, protocol.KindProcGet, protocol.ProcRef{ID: id}, &info)
	return processInfo(info), err
}

// WriteStdin writes to a background process's stdin.
func (c *Client) WriteStdin(ctx context.Context, req sandbox.StdinWrite) (sandbox.StdinResult, error) {
	if len(req.Data) > protocol.MaxProcStdin {
		return sandbox.StdinResult{}, fmt.Errorf("%w: one stdin write is limited to %d bytes", sandbox.ErrTooLarge, protocol.MaxProcStdin)
	}
	var res protocol.ProcStdinResult
	err := c.call(ctx, protocol.KindProcStdin, protocol.ProcStdin{ID: req.ID, Data: req.Data, Close: req.Close}, &res)
	return sandbox.StdinResult{Written: res.Written, Closed: res.Closed}, err
}

// SignalProcess signals a background process and waits up to wait for it
// to exit.
func (c *Client) SignalProcess(ctx context.Context, id string, sig int, wait time.Duration) (sandbox.ProcessInfo, error) {
	var info protocol.ProcInfo
	err := c.call(ctx, protocol.KindProcSignal, protocol.ProcSignal{ID: id, Signal: sig, Wait: protocol.Millis(wait)}, &info)
	return processInfo(info), err
}

// ProcessOutput reads a background process's output. Cancelling ctx ends
// a follow (the agent is told to detach; its last frame is still read),
// and the answer is then ctx's error.
func (c *Client) ProcessOutput(ctx context.Context, req sandbox.OutputRequest, out sandbox.OutputIO) (sandbox.OutputEnd, error) {
	id, ch := c.open()
	defer c.release(id)
	wire := protocol.ProcOutput{ID: req.ID, Offset: req.Offset, Limit: req.Limit, Follow: req.Follow}
	if err := c.sendJSON(protocol.KindProcOutput, id, wire); err != nil {
		return sandbox.OutputEnd{}, err
	}
	cn := &canceller{send: func() { c.send(protocol.KindProcDetach, id, nil) }}
	for {
		f, err := c.nextOrCancel(ctx, ch, cn)
		if err != nil {
			return sandbox.OutputEnd{}, err
		}
		switch f.Kind {
		case protocol.KindOK:
			var m protocol.ProcMark
			if err := json.Unmarshal(f.Payload, &m); err != nil {
				return sandbox.OutputEnd{}, fmt.Errorf("%w: malformed output mark from agent: %v", protocol.ErrInternal, err)
			}
			if out.Mark != nil {
				out.Mark(m.Offset, m.Dropped)
			}
		case protocol.KindStdout:
			if out.Stdout != nil {
				out.Stdout.Write(f.Payload)
			}
			protocol.Recycle(f)
		case protocol.KindStderr:
			if out.Stderr != nil {
				out.Stderr.Write(f.Payload)
			}
			protocol.Recycle(f)
		case protocol.KindDataEnd, protocol.KindError:
			var end protocol.ProcOutputEnd
			err := decodeReply(f, &end)
			if err == nil && cn.done {
				err = ctx.Err()
			}
			return sandbox.OutputEnd{Next: end.Next, Process: processInfo(end.Proc)}, err
		default:
			return sandbox.OutputEnd{}, fmt.Errorf("%w: unexpected frame kind %d in an output stream", protocol.ErrInternal, f.Kind)
		}
	}
}
