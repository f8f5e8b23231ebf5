package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/client"
)

// The cells 'cubicle-bench python' runs.
const (
	// onePlusOne is the round-trip cell; its result is onePlusOneResult.
	onePlusOne       = "1+1"
	onePlusOneResult = "2"
	// firstCell is the first cell of a brand-new computer.
	firstCell = "import pandas as pd; df = pd.DataFrame({'a': range(100)}); df.describe()"
	// plotCell is a first plot: a figure drawn to PNG (its result says
	// the PNG was made), and shown inline at the cell's end.
	plotCell = "import io; fig, ax = plt.subplots(figsize=(3, 2)); ax.plot([1, 3, 2]); b = io.BytesIO(); " +
		"fig.savefig(b, format='png'); b.getvalue()[:4] == b'\\x89PNG'"
	// kernelCPUCell's result is the kernel's user+sys CPU seconds so far
	// (all its threads; it names no prelude import).
	kernelCPUCell = "(lambda r: r.ru_utime + r.ru_stime)(__import__('resource').getrusage(0))"
)

// firstCellOK says whether text is df.describe() of range(100): a table
// with a count row and the mean 49.5.
func firstCellOK(text string) bool {
	return strings.Contains(text, "count") && strings.Contains(text, "49.5")
}

// pythonRequest is a python call of one cell. timeout 0 leaves the
// server's default.
func pythonRequest(code string, timeout int) client.PythonRequest {
	return client.PythonRequest{Cells: []client.Cell{{Code: code}}, Timeout: timeout}
}

// resultText returns the text of the first execute_result of outs.
func resultText(outs []client.Output) (string, bool) {
	for _, o := range outs {
		if o.Type == client.OutResult {
			return o.Text, true
		}
	}
	return "", false
}

// checkPython says whether a one-cell answer succeeded; ok judges its
// execute_result's text.
func checkPython(a client.PythonResult, ok func(string) bool) error {
	switch {
	case a.TimedOut:
		return errors.New("python: timed out")
	case a.Cancelled:
		return errors.New("python: cancelled")
	case len(a.Cells) != 1:
		return fmt.Errorf("python: %d cells in the answer, want 1", len(a.Cells))
	}
	outs := a.Cells[0].Outputs
	if a.Status != "ok" || a.Cells[0].Status != "ok" {
		for _, o := range outs {
			if o.Type == client.OutError {
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
// request until the answer was read and decoded; then it checks it.
func (c *apiClient) python(ctx context.Context, id string, req client.PythonRequest, ok func(string) bool, timeout time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	a, err := c.api.Python(ctx, id, req)
	if err != nil {
		return 0, err
	}
	return time.Since(start), checkPython(a, ok)
}

// pythonSSE runs one cell with its outputs streamed and returns the time
// until the closing result event was read and decoded (the client puts
// the outputs, which came before it, in the answer's cell).
func (c *apiClient) pythonSSE(ctx context.Context, id string, req client.PythonRequest, ok func(string) bool, timeout time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	a, err := c.api.PythonStream(ctx, id, req, nil)
	if err != nil {
		return 0, err
	}
	return time.Since(start), checkPython(a, ok)
}

// kernelCPU runs kernelCPUCell in computer id and returns the CPU time its
// kernel has used.
func (c *apiClient) kernelCPU(ctx context.Context, id string, timeout time.Duration) (time.Duration, error) {
	var secs float64
	_, err := c.python(ctx, id, pythonRequest(kernelCPUCell, 0), func(text string) bool {
		v, err := strconv.ParseFloat(text, 64)
		secs = v
		return err == nil && v >= 0 && v < 1e6
	}, timeout)
	if err != nil {
		return 0, fmt.Errorf("kernel CPU: %w", err)
	}
	return time.Duration(secs * float64(time.Second)), nil
}
