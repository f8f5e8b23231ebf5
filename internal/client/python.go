package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// Python runs cells and returns the whole answer (unary JSON).
func (c *Client) Python(ctx context.Context, id string, req PythonRequest) (PythonResult, error) {
	var res PythonResult
	_, err := c.Do(ctx, http.MethodPost, computerPath(id)+"/python", req, http.StatusOK, &res)
	return res, err
}

// PythonStream runs cells with their outputs streamed: onOutput sees each
// output event as it arrives. The server's closing result event carries
// no outputs; the result returned has them, assembled from the stream.
func (c *Client) PythonStream(ctx context.Context, id string, req PythonRequest, onOutput func(PythonOutput)) (PythonResult, error) {
	path := computerPath(id) + "/python"
	outs := make([][]Output, len(req.Cells))
	var res *PythonResult
	err := c.Stream(ctx, path, req, func(ev Event) error {
		switch ev.Name {
		case "output":
			var o struct {
				Cell   *int   `json:"cell"`
				Output Output `json:"output"`
			}
			if err := json.Unmarshal(ev.Data, &o); err != nil || o.Cell == nil || *o.Cell < 0 || *o.Cell >= len(outs) {
				return fmt.Errorf("bad output event %.100q: %v", ev.Data, err)
			}
			outs[*o.Cell] = append(outs[*o.Cell], o.Output)
			if onOutput != nil {
				onOutput(PythonOutput{Cell: *o.Cell, Output: o.Output})
			}
		case "result":
			res = new(PythonResult)
			if err := json.Unmarshal(ev.Data, res); err != nil {
				return fmt.Errorf("bad result event: %w", err)
			}
			return Stop
		case "error":
			return eventError(http.MethodPost, path, ev.Data)
		}
		return nil
	})
	if err == nil && res == nil {
		err = fmt.Errorf("POST %s: the event stream ended without a result event", path)
	}
	if err != nil {
		return PythonResult{}, err
	}
	for i := range res.Cells {
		if c := &res.Cells[i]; c.Outputs == nil {
			c.Outputs = []Output{}
			if c.Index >= 0 && c.Index < len(outs) && outs[c.Index] != nil {
				c.Outputs = outs[c.Index]
			}
		}
	}
	return *res, nil
}

// InterruptPython interrupts the computer's session kernel (its running
// cell ends with KeyboardInterrupt; the kernel's state is kept).
func (c *Client) InterruptPython(ctx context.Context, id string) error {
	_, err := c.Do(ctx, http.MethodPost, computerPath(id)+"/python/interrupt", nil, http.StatusNoContent, nil)
	return err
}
