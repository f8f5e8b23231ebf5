package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
	"github.com/cubicle-sandbox/cubicle/internal/kernel"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// pythonAsync starts a Python call on c and returns its outcome and the
// outputs it delivered.
type pythonOutcome struct {
	res  sandbox.PythonResult
	outs []sandbox.PythonOutput
	err  error
}

func pythonAsync(ctx context.Context, c *Client, req sandbox.PythonRequest) <-chan pythonOutcome {
	ch := make(chan pythonOutcome, 1)
	go func() {
		var o pythonOutcome
		o.res, o.err = c.Python(ctx, req, func(po sandbox.PythonOutput) { o.outs = append(o.outs, po) })
		ch <- o
	}()
	return ch
}

func pythonWait(t *testing.T, ch <-chan pythonOutcome) pythonOutcome {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(5 * time.Second):
		t.Fatal("Python did not return")
	}
	return pythonOutcome{}
}

func okResult(cells int) protocol.PythonResult {
	r := protocol.PythonResult{Status: "ok", FailedCell: -1}
	for i := range cells {
		r.Cells = append(r.Cells, protocol.CellResult{Index: i, Status: protocol.CellOK})
	}
	return r
}

func TestPythonClientStreamsOutputsInOrder(t *testing.T) {
	c, fa := newFakeAgent(t)
	req := sandbox.PythonRequest{Cells: []sandbox.PythonCell{{Code: "print(1)"}, {Code: "2"}}}
	done := pythonAsync(context.Background(), c, req)
	f := fa.expect(protocol.KindPython)
	var got protocol.PythonRequest
	if err := json.Unmarshal(f.Payload, &got); err != nil || len(got.Cells) != 2 || got.Cells[1].Code != "2" {
		t.Fatalf("request on the wire: %s (%v)", f.Payload, err)
	}
	for i := range 50 {
		fa.sendJSON(protocol.KindPythonOutput, f.ID, protocol.PythonOutput{Cell: i % 2, Output: protocol.Output{Type: string(kernel.OutStream), Name: "stdout", Text: strings.Repeat("x", i)}})
	}
	fa.sendJSON(protocol.KindOK, f.ID, okResult(2))
	o := pythonWait(t, done)
	if o.err != nil || o.res.Status != "ok" || len(o.outs) != 50 {
		t.Fatalf("%v %+v %d outputs", o.err, o.res, len(o.outs))
	}
	for i, po := range o.outs {
		if po.Cell != i%2 || len(po.Output.Text) != i {
			t.Fatalf("output %d out of order: %+v", i, po)
		}
	}
}

func TestPythonClientMalformedFrames(t *testing.T) {
	cases := []struct {
		name    string
		kind    protocol.Kind
		payload string
	}{
		{"not JSON", protocol.KindPythonOutput, `{"cell": 0, "output": {"type": "stream", "text": `},
		{"wrong shape", protocol.KindPythonOutput, `{"cell": "zero", "output": []}`},
		{"cell out of range", protocol.KindPythonOutput, `{"cell": 7, "output": {"type": "stream", "text": "x"}}`},
		{"negative cell", protocol.KindPythonOutput, `{"cell": -1, "output": {"type": "stream", "text": "x"}}`},
		{"huge number", protocol.KindPythonOutput, `{"cell": 1e400}`},
		{"foreign frame kind", protocol.KindStdout, `hello`},
		{"unknown frame kind", protocol.Kind(200), `{}`},
		{"malformed result", protocol.KindOK, `{"cells": 5}`},
		{"result with other cells", protocol.KindOK, `{"status": "ok", "cells": []}`},
		{"malformed error", protocol.KindError, `nope`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, fa := newFakeAgent(t)
			done := pythonAsync(context.Background(), c, sandbox.PythonRequest{Cells: []sandbox.PythonCell{{Code: "1"}}})
			f := fa.expect(protocol.KindPython)
			fa.send(tc.kind, f.ID, []byte(tc.payload))
			o := pythonWait(t, done)
			if o.err == nil || !errors.Is(o.err, protocol.ErrInternal) {
				t.Fatalf("got %v, %+v; want an internal error", o.err, o.res)
			}
			t.Logf("%v", o.err)
			if tc.kind != protocol.KindOK && tc.kind != protocol.KindError {
				// The agent is told to stop the call.
				fa.expect(protocol.KindPythonCancel)
			}
			clientPingOK(t, c, fa)
		})
	}
}

func TestPythonClientCancelWaitsForTheAgent(t *testing.T) {
	c, fa := newFakeAgent(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := pythonAsync(ctx, c, sandbox.PythonRequest{Cells: []sandbox.PythonCell{{Code: "import time; time.sleep(100)"}}})
	f := fa.expect(protocol.KindPython)
	fa.sendJSON(protocol.KindPythonOutput, f.ID, protocol.PythonOutput{Output: protocol.Output{Type: string(kernel.OutStream), Text: "before\n"}})
	cancel()
	fa.expect(protocol.KindPythonCancel)
	select {
	case o := <-done:
		t.Fatalf("returned before the agent finished: %+v", o)
	case <-time.After(100 * time.Millisecond):
	}
	// Outputs after the cancel are still delivered; the cancel is sent once.
	fa.sendJSON(protocol.KindPythonOutput, f.ID, protocol.PythonOutput{Output: protocol.Output{Type: string(kernel.OutError), EName: "KeyboardInterrupt"}})
	res := protocol.PythonResult{Status: "cancelled", Cancelled: true, FailedCell: -1, Cells: []protocol.CellResult{{Status: protocol.CellCancelled}}, Message: "The call was cancelled while cell 1 was running."}
	fa.sendJSON(protocol.KindOK, f.ID, res)
	o := pythonWait(t, done)
	if o.err != nil || !o.res.Cancelled || len(o.outs) != 2 || o.outs[1].Output.EName != "KeyboardInterrupt" {
		t.Fatalf("%v %+v %+v", o.err, o.res, o.outs)
	}
	select {
	case f := <-fa.frames:
		t.Fatalf("unexpected frame after the call: kind %d", f.Kind)
	case <-time.After(50 * time.Millisecond):
	}
}

func TestPythonClientAgentGone(t *testing.T) {
	c, fa := newFakeAgent(t)
	done := pythonAsync(context.Background(), c, sandbox.PythonRequest{Cells: []sandbox.PythonCell{{Code: "1"}}})
	fa.expect(protocol.KindPython)
	fa.conn.Close()
	if o := pythonWait(t, done); !errors.Is(o.err, sandbox.ErrGone) {
		t.Fatalf("got %v", o.err)
	}
}

func TestPythonClientRefusesOversizedRequests(t *testing.T) {
	c, _ := newFakeAgent(t)
	_, err := c.Python(context.Background(), sandbox.PythonRequest{Cells: []sandbox.PythonCell{{Code: strings.Repeat("x", protocol.MaxPayload)}}}, nil)
	if !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatalf("got %v", err)
	}
	if err := c.PythonControl(context.Background(), "reboot"); !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatalf("PythonControl: %v", err)
	}
}

func TestPythonClientControl(t *testing.T) {
	c, fa := newFakeAgent(t)
	done := clientAsync(func() error { return c.PythonControl(context.Background(), "restart") })
	f := fa.expect(protocol.KindPythonControl)
	var pc protocol.PythonControl
	if err := json.Unmarshal(f.Payload, &pc); err != nil || pc.Action != "restart" {
		t.Fatalf("control on the wire: %s", f.Payload)
	}
	fa.sendJSON(protocol.KindError, f.ID, protocol.WireError{Code: "internal", Message: "kernel did not start"})
	if err := clientWait(t, done, "PythonControl"); !errors.Is(err, protocol.ErrInternal) || !strings.Contains(err.Error(), "did not start") {
		t.Fatalf("got %v", err)
	}
}

// decodeAll checks that every payload fits in a frame and decodes.
func decodeAll(t *testing.T, payloads [][]byte) []protocol.PythonOutput {
	t.Helper()
	var outs []protocol.PythonOutput
	for _, p := range payloads {
		if len(p) > protocol.MaxPayload {
			t.Fatalf("payload of %d bytes", len(p))
		}
		var o protocol.PythonOutput
		if err := json.Unmarshal(p, &o); err != nil {
			t.Fatal(err)
		}
		outs = append(outs, o)
	}
	return outs
}

func TestPythonEncodeOutputFitsInFrames(t *testing.T) {
	// Stream text that JSON escapes six-fold, with multi-byte runes.
	text := strings.Repeat("<&>\x01é€😀\n", 200000)
	outs := decodeAll(t, encodeOutput(3, kernel.Output{Type: kernel.OutStream, Name: "stderr", Text: text}))
	var b strings.Builder
	for _, o := range outs {
		if o.Cell != 3 || o.Output.Name != "stderr" || o.Output.Type != string(kernel.OutStream) {
			t.Fatalf("piece %+v", o)
		}
		b.WriteString(o.Output.Text)
	}
	if b.String() != text || len(outs) < 2 {
		t.Fatalf("stream split into %d pieces does not add up", len(outs))
	}

	// A display whose text and image together are too large keeps the image.
	png := bytes.Repeat([]byte{0x89}, 700<<10)
	outs = decodeAll(t, encodeOutput(0, kernel.Output{Type: kernel.OutDisplay, Text: strings.Repeat("<td>", 200000), PNG: png, Width: 10, Height: 10}))
	if len(outs) != 1 || !bytes.Equal(outs[0].Output.PNG, png) || len(outs[0].Output.Text) > fitBudget ||
		!strings.HasPrefix(strings.Join(outs[0].Output.Omitted, "|"), "text (omitted: ") {
		t.Fatalf("display: text %d bytes, png %d, omitted %v", len(outs[0].Output.Text), len(outs[0].Output.PNG), outs[0].Output.Omitted)
	}

	// An image that cannot fit at all is replaced by a note.
	outs = decodeAll(t, encodeOutput(0, kernel.Output{Type: kernel.OutDisplay, Text: "<Figure>", PNG: make([]byte, 900<<10)}))
	if len(outs) != 1 || outs[0].Output.PNG != nil || outs[0].Output.Text != "<Figure>" ||
		!strings.Contains(strings.Join(outs[0].Output.Omitted, "|"), "image/png (omitted: 921600 bytes") {
		t.Fatalf("big image: %+v", outs[0].Output.Omitted)
	}

	// An error with a huge traceback keeps its end.
	tb := []string{strings.Repeat("frame\n", 200000), "ValueError: the end"}
	outs = decodeAll(t, encodeOutput(1, kernel.Output{Type: kernel.OutError, EName: "ValueError", EValue: strings.Repeat("v", 1<<20), Traceback: tb}))
	o := outs[0].Output
	if o.Traceback[len(o.Traceback)-1] != "ValueError: the end" || len(o.EValue) > 4<<10 || o.EName != "ValueError" {
		t.Fatalf("error: %d frames, evalue %d bytes", len(o.Traceback), len(o.EValue))
	}

	// Small outputs pass unchanged.
	small := kernel.Output{Type: kernel.OutResult, Text: "2", MIME: "text/plain", ExecutionCount: 4}
	if outs := decodeAll(t, encodeOutput(0, small)); len(outs) != 1 || outs[0].Output.Text != "2" || outs[0].Output.ExecutionCount != 4 {
		t.Fatalf("small: %+v", outs)
	}
}

func TestPythonSplitText(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"hello", 10, "hello"},
		{"ab\ncdef", 5, "ab\n"},
		{"abcdef\ng", 5, "abcde"},
		{"aé", 2, "a"},
		{"a😀b", 4, "a"},
		{"\xff\xff\xff\xff\xff", 3, "\xff\xff\xff"},
	} {
		if got := splitText(tc.s, tc.n); got != tc.want {
			t.Errorf("splitText(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}

func TestPythonTurnstileOrderAndCancel(t *testing.T) {
	var ts turnstile
	first := ts.enqueue()
	if err := ts.wait(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	tickets := make([]*ticket, 5)
	for i := range tickets {
		tickets[i] = ts.enqueue()
	}
	ctx, cancel := context.WithCancel(context.Background())
	for i, tk := range tickets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wctx := context.Background()
			if i == 2 {
				wctx = ctx
			}
			if err := ts.wait(wctx, tk); err != nil {
				return // left the queue
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			ts.release()
		}()
	}
	cancel() // ticket 2 leaves the queue before its turn
	time.Sleep(20 * time.Millisecond)
	front := ts.enqueueFront() // jumps ahead of everyone still waiting
	ts.release()               // first's turn ends
	if err := ts.wait(context.Background(), front); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(order) != 0 {
		t.Fatalf("ran before the front ticket: %v", order)
	}
	mu.Unlock()
	ts.release()
	wg.Wait()
	if want := []int{0, 1, 3, 4}; !equalInts(order, want) {
		t.Fatalf("order %v, want %v", order, want)
	}
	// Free again: a new ticket gets its turn at once.
	if err := ts.wait(context.Background(), ts.enqueue()); err != nil {
		t.Fatal(err)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestValidatePython(t *testing.T) {
	req := protocol.PythonRequest{}
	if err := validatePython(&req); err != nil || req.Mode != protocol.ModeSession || req.Timeout.D() != sandbox.DefaultPythonTimeout || req.MaxOutput != defaultMaxOutput {
		t.Fatalf("defaults: %v %+v", err, req)
	}
	req = protocol.PythonRequest{Mode: protocol.ModePerCall, Timeout: protocol.Millis(time.Hour), MaxOutput: 1 << 40}
	if err := validatePython(&req); err != nil || req.Timeout.D() != sandbox.MaxPythonTimeout || req.MaxOutput != maxOutputLimit {
		t.Fatalf("clamps: %v %+v", err, req)
	}
	for _, bad := range []protocol.PythonRequest{{Mode: "forever"}, {Cells: make([]protocol.PythonCell, maxCells+1)}} {
		if err := validatePython(&bad); !errors.Is(err, protocol.ErrInvalid) {
			t.Errorf("%+v accepted: %v", bad.Mode, err)
		}
	}
}

func TestPythonMessages(t *testing.T) {
	r := kernel.Result{Error: &kernel.Output{EName: "ZeroDivisionError", EValue: "division by zero"}}
	if got := cellName(1, "divide") + " failed: " + failureText(&r); got != "Cell 2 (divide) failed: ZeroDivisionError: division by zero" {
		t.Errorf("%q", got)
	}
	r = kernel.Result{InputRequested: true, Error: &kernel.Output{EName: "EOFError", EValue: "EOF when reading a line"}}
	if got := failureText(&r); !strings.HasPrefix(got, "EOFError: EOF when reading a line (input() is not supported") {
		t.Errorf("%q", got)
	}
	if got := cellName(0, "multi\nline"); got != "Cell 1 (multi…)" {
		t.Errorf("%q", got)
	}
	if got := msgTimedOut(timeoutSecs(protocol.PythonRequest{Timeout: protocol.Millis(2 * time.Second)})); got != "Command timed out after 2 seconds" {
		t.Errorf("%q", got)
	}
}
