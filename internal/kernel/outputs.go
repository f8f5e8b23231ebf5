package kernel

import (
	"encoding/json"
)

// OutputType says what an Output is.
type OutputType string

const (
	// OutStream is text written to stdout or stderr (Name says which).
	OutStream OutputType = "stream"
	// OutDisplay is display_data: Text (from MIME), JSON, PNG.
	OutDisplay OutputType = "display_data"
	// OutResult is the value of the cell's last expression (execute_result).
	OutResult OutputType = "execute_result"
	// OutError is an exception: EName, EValue, Traceback (ANSI stripped).
	OutError OutputType = "error"
	// OutUpdate replaces an earlier display (update_display_data); it only
	// appears in streamed outputs: in Result.Outputs the display is replaced.
	OutUpdate OutputType = "update_display_data"
	// OutClear is clear_output. Streamed: "drop what you showed for this
	// cell". In Result.Outputs: one note, first, saying how many outputs were
	// cleared (Text).
	OutClear OutputType = "clear_output"
	// OutInput marks where the cell called input(); Text is the prompt. The
	// request was answered with end-of-file.
	OutInput OutputType = "input_request"
	// OutTruncated marks where the cell's output reached the cap; Text says
	// how much was dropped after it.
	OutTruncated OutputType = "truncated"
)

// Output is one output of a cell. It carries no JSON tags: each transport
// has its own shape of it (internal/httpapi's pythonOutput, the control
// channel's protocol.Output).
type Output struct {
	Type OutputType
	Name string // stream: "stdout" or "stderr"
	// Text: stream text; display/result: the chosen text representation;
	// notes for clear_output, input_request and truncated.
	Text string
	// MIME is the representation Text came from: text/markdown, text/plain
	// or text/html (converted to markdown).
	MIME string
	JSON json.RawMessage // application/json, compacted
	// PNG is a validated image/png (decoded bytes).
	PNG            []byte
	Width          int
	Height         int
	ExecutionCount int
	EName          string
	EValue         string
	Traceback      []string
	// Omitted lists representations the kernel sent that are not returned
	// (other MIME types, an alternative text form, an invalid image and why).
	Omitted []string
	// DisplayID is the transient display_id, if any (for updates).
	DisplayID string
}

func (o *Output) size() int64 {
	n := len(o.Text) + len(o.JSON) + len(o.PNG) + len(o.EName) + len(o.EValue)
	for _, t := range o.Traceback {
		n += len(t)
	}
	return int64(n)
}

// errorReserve bounds the one error output kept after the output cap.
const errorReserve = 64 << 10

// MaxOutputs bounds the outputs of one cell, adjacent stream text of the
// same stream counting as one: past it, one marker (OutTruncated) says how
// much more was dropped.
const MaxOutputs = 1000

// maxEventText bounds the text of one streamed stream event made of merged
// chunks.
const maxEventText = 64 << 10

// Jupyter content shapes.
type streamContent struct {
	Name string `json:"name"`
	Text string `json:"text"`
}

type displayContent struct {
	Data           map[string]json.RawMessage `json:"data"`
	ExecutionCount *int                       `json:"execution_count"`
	Transient      struct {
		DisplayID string `json:"display_id"`
	} `json:"transient"`
}

type errorContent struct {
	EName     string   `json:"ename"`
	EValue    string   `json:"evalue"`
	Traceback []string `json:"traceback"`
}

type clearContent struct {
	Wait bool `json:"wait"`
}
