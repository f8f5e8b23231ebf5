package agent

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// Python runs cells in the computer's kernel (see PythonRequest). onOutput,
// if set, receives every output as the agent streams it, in order, from the
// caller's goroutine. Cancelling ctx asks the agent to interrupt the kernel
// (escalating to a restart); Python still returns only when the agent has
// finished the call, with the cancelled result it sent.
//
// Frames from the agent are hostile input: a malformed output frame cancels
// the call and returns an error at once.
func (c *Client) Python(ctx context.Context, req sandbox.PythonRequest, onOutput func(sandbox.PythonOutput)) (sandbox.PythonResult, error) {
	id, ch := c.open()
	defer c.release(id)
	b, err := json.Marshal(wirePython(req))
	if err != nil {
		return sandbox.PythonResult{}, fmt.Errorf("%w: %v", sandbox.ErrInvalid, err)
	}
	if len(b) > protocol.MaxPayload {
		return sandbox.PythonResult{}, fmt.Errorf("%w: the Python request is %d bytes; the limit is %d", sandbox.ErrInvalid, len(b), protocol.MaxPayload)
	}
	if err := c.send(protocol.KindPython, id, b); err != nil {
		return sandbox.PythonResult{}, err
	}
	cn := &canceller{send: func() { c.send(protocol.KindPythonCancel, id, nil) }}
	for {
		f, err := c.nextOrCancel(ctx, ch, cn)
		if err != nil {
			return sandbox.PythonResult{}, err
		}
		switch f.Kind {
		case protocol.KindPythonOutput:
			var o protocol.PythonOutput
			if err := json.Unmarshal(f.Payload, &o); err != nil {
				cn.cancel()
				return sandbox.PythonResult{}, fmt.Errorf("%w: malformed Python output from the agent: %v", protocol.ErrInternal, err)
			}
			if o.Cell < 0 || o.Cell >= len(req.Cells) {
				cn.cancel()
				return sandbox.PythonResult{}, fmt.Errorf("%w: Python output for cell %d of a call with %d cells", protocol.ErrInternal, o.Cell, len(req.Cells))
			}
			if onOutput != nil {
				onOutput(pythonOutput(o))
			}
		case protocol.KindOK, protocol.KindError:
			var res protocol.PythonResult
			if err := decodeReply(f, &res); err != nil {
				return sandbox.PythonResult{}, err
			}
			if len(res.Cells) != len(req.Cells) {
				return sandbox.PythonResult{}, fmt.Errorf("%w: Python result with %d cells for a call with %d", protocol.ErrInternal, len(res.Cells), len(req.Cells))
			}
			return pythonResult(res), nil
		default:
			cn.cancel()
			return sandbox.PythonResult{}, fmt.Errorf("%w: unexpected frame kind %d in a Python stream", protocol.ErrInternal, f.Kind)
		}
	}
}

// PythonControl interrupts ("interrupt") or restarts ("restart") the
// session kernel. A restart ends a running call (cancelled) and starts a new
// kernel with the last prelude; it clears a permanent failure.
func (c *Client) PythonControl(ctx context.Context, action string) error {
	switch action {
	case "interrupt", "restart":
	default:
		return fmt.Errorf("%w: python control %q (want \"interrupt\" or \"restart\")", sandbox.ErrInvalid, action)
	}
	return c.call(ctx, protocol.KindPythonControl, protocol.PythonControl{Action: action}, nil)
}
