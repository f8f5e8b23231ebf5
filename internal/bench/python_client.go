package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// The cells 'cubicle bench python' runs.
const (
	// onePlusOne is the round-trip cell; its result is onePlusOneResult.
	onePlusOne       = "1+1"
	onePlusOneResult = "2"
	// firstCell is the first cell of a brand-new computer.
	firstCell = "import pandas as pd; df = pd.DataFrame({'a': range(100)}); df.describe()"
)

// firstCellOK says whether text is df.describe() of range(100): a table
// with a count row and the mean 49.5.
func firstCellOK(text string) bool {
	return strings.Contains(text, "count") && strings.Contains(text, "49.5")
}

// pythonBody is the JSON body of POST /v1/computers/{id}/python with one
// cell. timeout 0 leaves the server's default.
func pythonBody(code string, timeout int) []byte {
	v := map[string]any{"cells": []map[string]string{{"code": code}}}
	if timeout > 0 {
		v["timeout"] = timeout
	}
	b, _ := json.Marshal(v)
	return b
}

// pyOutput is the part of an output the bench reads.
type pyOutput struct {
	Type   string `json:"type"`
	Name   string `json:"name"`
	Text   string `json:"text"`
	MIME   string `json:"mime"`
	EName  string `json:"ename"`
	EValue string `json:"evalue"`
}

// pyCell is one cell of a python answer.
type pyCell struct {
	Index          int        `json:"index"`
	Status         string     `json:"status"`
	ExecutionCount int        `json:"execution_count"`
	Outputs        []pyOutput `json:"outputs"`
}

// pythonAnswer is the answer of POST …/python (and the SSE result event).
type pythonAnswer struct {
	Status     string   `json:"status"`
	Cells      []pyCell `json:"cells"`
	FailedCell *int     `json:"failed_cell"`
	Cancelled  bool     `json:"cancelled"`
	TimedOut   bool     `json:"timed_out"`
	Message    string   `json:"message"`
}

// result returns the text of the first cell's execute_result.
func (a pythonAnswer) result() (string, bool) {
	if len(a.Cells) == 0 {
		return "", false
	}
	return resultText(a.Cells[0].Outputs)
}

func resultText(outs []pyOutput) (string, bool) {
	for _, o := range outs {
		if o.Type == "execute_result" {
			return o.Text, true
		}
	}
	return "", false
}

// check says whether a one-cell answer succeeded. outs are the cell's
// outputs (from the answer, or the streamed output events); ok judges the
// execute_result's text.
func (a pythonAnswer) check(outs []pyOutput, ok func(string) bool) error {
	switch {
	case a.TimedOut:
		return errors.New("python: timed out")
	case a.Cancelled:
		return errors.New("python: cancelled")
	case len(a.Cells) != 1:
		return fmt.Errorf("python: %d cells in the answer, want 1", len(a.Cells))
	case a.Status != "ok" || a.Cells[0].Status != "ok":
		for _, o := range outs {
			if o.Type == "error" {
				return fmt.Errorf("python: status %q, cell %q: %s: %s", a.Status, a.Cells[0].Status, o.EName, o.EValue)
			}
		}
		return fmt.Errorf("python: status %q, cell %q %s", a.Status, a.Cells[0].Status, a.Message)
	}
	text, found := resultText(outs)
	switch {
	case !found:
		return fmt.Errorf("python: no execute_result among %d outputs", len(outs))
	case !ok(text):
		return fmt.Errorf("python: unexpected result %.200q", text)
	}
	return nil
}

// isResult returns a judge that wants exactly s.
func isResult(s string) func(string) bool { return func(t string) bool { return t == s } }

// python runs one cell (unary JSON) and returns the time from sending the
// request until the answer was read, decoded and checked.
func (c *apiClient) python(ctx context.Context, id string, body []byte, ok func(string) bool, timeout time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var a pythonAnswer
	d, err := c.postJSON(ctx, "/v1/computers/"+id+"/python", body, &a)
	if err != nil {
		return 0, err
	}
	var outs []pyOutput
	if len(a.Cells) > 0 {
		outs = a.Cells[0].Outputs
	}
	return d, a.check(outs, ok)
}

// pythonSSE runs one cell with Accept: text/event-stream and returns the
// time until the closing result event was read and decoded. The outputs
// arrive before it as output events {cell, output}.
func (c *apiClient) pythonSSE(ctx context.Context, id string, body []byte, ok func(string) bool, timeout time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	path := "/v1/computers/" + id + "/python"
	var (
		d    time.Duration
		outs []pyOutput
		res  *pythonAnswer
	)
	err := c.postSSE(ctx, path, body, func(start time.Time, event string, data []byte) error {
		switch event {
		case "output":
			var o struct {
				Cell   int      `json:"cell"`
				Output pyOutput `json:"output"`
			}
			if err := json.Unmarshal(data, &o); err != nil {
				return fmt.Errorf("output event: %w", err)
			}
			outs = append(outs, o.Output)
		case "result":
			res = new(pythonAnswer)
			if err := json.Unmarshal(data, res); err != nil {
				return fmt.Errorf("result event: %w", err)
			}
			d = time.Since(start)
			return io.EOF
		case "error":
			return fmt.Errorf("error event: %s", data)
		}
		return nil
	})
	switch {
	case err != nil:
		return 0, err
	case res == nil:
		return 0, fmt.Errorf("POST %s (SSE): the stream ended without a result event", path)
	}
	return d, res.check(outs, ok)
}
