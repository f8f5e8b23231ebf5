package agent

import (
	"context"
	"encoding/json"
	"fmt"
)

// Python runs cells in the computer's kernel (see PythonRequest). onOutput,
// if set, receives every output as the agent streams it, in order, from the
// caller's goroutine. Cancelling ctx asks the agent to interrupt the kernel
// (escalating to a restart); Python still returns only when the agent has
// finished the call, with the cancelled result it sent.
//
// Frames from the agent are hostile input: a malformed output frame cancels
// the call and returns an error at once.
func (c *Client) Python(ctx context.Context, req PythonRequest, onOutput func(PythonOutput)) (PythonResult, error) {
	id, ch := c.open()
	defer c.release(id)
	b, err := json.Marshal(req)
	if err != nil {
		return PythonResult{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if len(b) > MaxPayload {
		return PythonResult{}, fmt.Errorf("%w: the Python request is %d bytes; the limit is %d", ErrInvalid, len(b), MaxPayload)
	}
	if err := c.send(KindPython, id, b); err != nil {
		return PythonResult{}, err
	}
	cn := &canceller{send: func() { c.send(KindPythonCancel, id, nil) }}
	for {
		f, err := c.nextOrCancel(ctx, ch, cn)
		if err != nil {
			return PythonResult{}, err
		}
		switch f.Kind {
		case KindPythonOutput:
			var o PythonOutput
			if err := json.Unmarshal(f.Payload, &o); err != nil {
				cn.cancel()
				return PythonResult{}, fmt.Errorf("%w: malformed Python output from the agent: %v", ErrInternal, err)
			}
			if o.Cell < 0 || o.Cell >= len(req.Cells) {
				cn.cancel()
				return PythonResult{}, fmt.Errorf("%w: Python output for cell %d of a call with %d cells", ErrInternal, o.Cell, len(req.Cells))
			}
			if onOutput != nil {
				onOutput(o)
			}
		case KindOK, KindError:
			var res PythonResult
			if err := decodeReply(f, &res); err != nil {
				return PythonResult{}, err
			}
			if len(res.Cells) != len(req.Cells) {
				return PythonResult{}, fmt.Errorf("%w: Python result with %d cells for a call with %d", ErrInternal, len(res.Cells), len(req.Cells))
			}
			return res, nil
		default:
			cn.cancel()
			return PythonResult{}, fmt.Errorf("%w: unexpected frame kind %d in a Python stream", ErrInternal, f.Kind)
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
		return fmt.Errorf("%w: python control %q (want \"interrupt\" or \"restart\")", ErrInvalid, action)
	}
	return c.call(ctx, KindPythonControl, PythonControl{Action: action}, nil)
}
