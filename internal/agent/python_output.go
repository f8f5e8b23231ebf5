package agent

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
	"github.com/cubicle-sandbox/cubicle/internal/kernel"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// streamPiece bounds the text of one streamed stream output. JSON escaping
// at most sextuples a byte ("<" becomes \u003c), so a piece always fits in
// one frame with room to spare.
const streamPiece = 128 << 10

// fitBudget bounds each large text part of a non-stream output that did not
// fit in a frame as it was (text, traceback).
const fitBudget = 64 << 10

// encodeOutput turns one kernel output into PythonOutput payloads that each
// fit in a control frame. Stream text is split into pieces (consumers
// concatenate consecutive stream outputs anyway); any other output that is
// too large loses its PNG, JSON or the end of its text, and says so in
// Omitted, rather than failing the call.
func encodeOutput(cell int, o kernel.Output) [][]byte {
	if o.Type == kernel.OutStream && len(o.Text) > streamPiece {
		var out [][]byte
		for text := o.Text; text != ""; {
			piece := splitText(text, streamPiece)
			text = text[len(piece):]
			p := o
			p.Text = piece
			out = append(out, encodeOutput(cell, p)...)
		}
		return out
	}
	enc := func(o kernel.Output) []byte {
		b, err := json.Marshal(protocol.PythonOutput{Cell: cell, Output: wireOutput(o)})
		if err != nil {
			return nil
		}
		return b
	}
	if b := enc(o); b != nil && len(b) <= protocol.MaxPayload {
		return [][]byte{b}
	}
	// Too large for one frame: cut the text parts, keep the image if it
	// fits (with less text if need be), else drop it.
	orig := o
	for _, try := range []struct {
		budget  int
		dropPNG bool
	}{{fitBudget, false}, {4 << 10, false}, {fitBudget, true}} {
		if try.dropPNG && orig.PNG == nil {
			break
		}
		if b := enc(shrinkOutput(orig, try.budget, try.dropPNG)); b != nil && len(b) <= protocol.MaxPayload {
			return [][]byte{b}
		}
	}
	// Unreachable with the bounds above; never fail the call for it.
	b := enc(kernel.Output{Type: kernel.OutTruncated, Text: fmt.Sprintf("[an output of type %s was omitted: it does not fit in one message]", clipString(string(o.Type), 64))})
	return [][]byte{b}
}

// shrinkOutput cuts an output's large parts to budget bytes each (the end of
// its text, the first frames of its traceback, JSON entirely) and notes what
// was left out in Omitted.
func shrinkOutput(o kernel.Output, budget int, dropPNG bool) kernel.Output {
	o.Omitted = append([]string(nil), o.Omitted...)
	if t := splitText(o.Text, budget); len(t) < len(o.Text) {
		o.Omitted = append(o.Omitted, fmt.Sprintf("text (omitted: the last %d bytes did not fit in one message)", len(o.Text)-len(t)))
		o.Text = t
	}
	if len(o.JSON) > budget {
		o.Omitted = append(o.Omitted, fmt.Sprintf("application/json (omitted: %d bytes do not fit in one message)", len(o.JSON)))
		o.JSON = nil
	}
	o.EValue = splitText(o.EValue, 4<<10)
	if tb, cut := fitTraceback(o.Traceback, budget); cut > 0 {
		o.Traceback = tb
		o.Omitted = append(o.Omitted, fmt.Sprintf("traceback (omitted: %d bytes of its first frames did not fit in one message)", cut))
	}
	if dropPNG && o.PNG != nil {
		o.Omitted = append(o.Omitted, fmt.Sprintf("image/png (omitted: %d bytes do not fit in one message)", len(o.PNG)))
		o.PNG, o.Width, o.Height = nil, 0, 0
	}
	if len(o.Omitted) > 40 {
		o.Omitted = o.Omitted[len(o.Omitted)-40:]
	}
	return o
}

// splitText returns a prefix of s of at most n bytes, ending after a line
// break when one is in its second half, never splitting a UTF-8 sequence
// (unless s is not UTF-8 there).
func splitText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	p := s[:n]
	if i := strings.LastIndexByte(p, '\n'); i >= n/2 {
		return p[:i+1]
	}
	for i := 0; i < utf8.UTFMax-1 && len(p) > 1; i++ {
		if utf8.RuneStart(s[len(p)]) {
			break
		}
		p = p[:len(p)-1]
	}
	return p
}

// fitTraceback keeps the last frames of a traceback within n bytes (where
// the exception is) and reports how many bytes were cut.
func fitTraceback(tb []string, n int) ([]string, int) {
	total := 0
	for _, t := range tb {
		total += len(t)
	}
	if total <= n {
		return tb, 0
	}
	var kept []string
	budget := n
	for i := len(tb) - 1; i >= 0 && budget > 0; i-- {
		t := tb[i]
		if len(t) > budget {
			t = t[len(t)-budget:]
			for len(t) > 0 && !utf8.RuneStart(t[0]) {
				t = t[1:]
			}
		}
		budget -= len(t)
		kept = append(kept, t)
	}
	for i, j := 0, len(kept)-1; i < j; i, j = i+1, j-1 {
		kept[i], kept[j] = kept[j], kept[i]
	}
	cut := total
	for _, t := range kept {
		cut -= len(t)
	}
	return kept, cut
}

// Messages (one sentence each, for people and models).
const (
	msgPermanentFailure = "The Python kernel crashed twice and was not restarted again."
	msgNoInput          = "input() is not supported: there is no interactive stdin; put the data in the code"
)

func msgTimedOut(secs int) string { return sandbox.PythonTimedOut(secs) }

// cellName is "Cell 2" or "Cell 2 (load data)".
func cellName(i int, title string) string {
	if title != "" {
		return fmt.Sprintf("Cell %d (%s)", i+1, clipString(oneLine(title), 200))
	}
	return fmt.Sprintf("Cell %d", i+1)
}

// failureText is "<ename>: <evalue>" of a failed cell, or why it failed.
func failureText(r *kernel.Result) string {
	var s string
	switch {
	case r.Error != nil && r.Error.EValue != "":
		s = clipString(r.Error.EName, 200) + ": " + clipString(r.Error.EValue, 1000)
	case r.Error != nil && r.Error.EName != "":
		s = clipString(r.Error.EName, 200)
	case r.Status == "aborted":
		s = "the kernel aborted it"
	case r.InputRequested:
		s = "it asked for input"
	default:
		s = "it reported an error"
	}
	if r.InputRequested {
		s += " (" + msgNoInput + ")"
	}
	return s
}

func oneLine(s string) string {
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		return s[:i] + "…"
	}
	return s
}

// wireOutput is o as the protocol carries it.
func wireOutput(o kernel.Output) protocol.Output {
	return protocol.Output{Type: string(o.Type), Name: o.Name, Text: o.Text, MIME: o.MIME, JSON: o.JSON,
		PNG: o.PNG, Width: o.Width, Height: o.Height, ExecutionCount: o.ExecutionCount, EName: o.EName,
		EValue: o.EValue, Traceback: o.Traceback, Omitted: o.Omitted, DisplayID: o.DisplayID}
}

// KernelOutput is the output o carries, for the host (wireOutput's inverse).
func KernelOutput(o protocol.Output) kernel.Output {
	return kernel.Output{Type: kernel.OutputType(o.Type), Name: o.Name, Text: o.Text, MIME: o.MIME, JSON: o.JSON,
		PNG: o.PNG, Width: o.Width, Height: o.Height, ExecutionCount: o.ExecutionCount, EName: o.EName,
		EValue: o.EValue, Traceback: o.Traceback, Omitted: o.Omitted, DisplayID: o.DisplayID}
}
