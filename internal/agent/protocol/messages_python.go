package protocol

import "encoding/json"

// Python frames. A call is KindPython (JSON PythonRequest) on a new stream;
// the agent answers with KindPythonOutput frames as outputs happen, then one
// KindOK (JSON PythonResult, without outputs: the host assembles them from
// the stream, so no frame ever carries a whole call's output) or KindError.
// KindPythonCancel on the call's stream cancels it (interrupt, escalating to
// a kernel restart). KindPythonControl (JSON PythonControl) on its own
// stream interrupts or restarts the session kernel; the answer is KindOK.
const (
	KindPython        Kind = iota + 32 // JSON PythonRequest
	KindPythonCancel                   // empty
	KindPythonControl                  // JSON PythonControl
	KindPythonOutput  Kind = iota + 96 // JSON PythonOutput (agent to host)
)

// Python execution modes.
const (
	ModeSession = "session"  // one kernel per computer, reused, calls serialized
	ModePerCall = "per_call" // a fresh kernel for this call, discarded after
)

// PythonCell is one cell of a call.
type PythonCell struct {
	Code  string `json:"code"`
	Title string `json:"title,omitempty"`
}

// PythonRequest runs cells in order in one kernel.
type PythonRequest struct {
	Cells   []PythonCell `json:"cells"`
	Timeout Duration     `json:"timeout"` // the whole call
	Cwd     string       `json:"cwd,omitempty"`
	Reset   bool         `json:"reset,omitempty"` // restart the session kernel before the first cell
	Mode    string       `json:"mode,omitempty"`  // ModeSession (default) or ModePerCall
	// Prelude runs in every new kernel before its first cell (imports).
	Prelude string `json:"prelude,omitempty"`
	// MaxOutput caps each cell's outputs in bytes (0: the agent's default).
	MaxOutput int64 `json:"max_output,omitempty"`
}

// PythonOutput is one output of one cell, streamed as it happens.
type PythonOutput struct {
	Cell   int    `json:"cell"`
	Output Output `json:"output"`
}

// Output is one kernel output as it travels (internal/kernel's Output,
// which both ends convert from and to: the protocol imports nothing).
type Output struct {
	Type           string          `json:"type"`
	Name           string          `json:"name,omitempty"`
	Text           string          `json:"text,omitempty"`
	MIME           string          `json:"mime,omitempty"`
	JSON           json.RawMessage `json:"json,omitempty"`
	PNG            []byte          `json:"png,omitempty"`
	Width          int             `json:"width,omitempty"`
	Height         int             `json:"height,omitempty"`
	ExecutionCount int             `json:"execution_count,omitempty"`
	EName          string          `json:"ename,omitempty"`
	EValue         string          `json:"evalue,omitempty"`
	Traceback      []string        `json:"traceback,omitempty"`
	Omitted        []string        `json:"omitted,omitempty"`
	DisplayID      string          `json:"display_id,omitempty"`
}

// Cell statuses.
const (
	CellOK        = "ok"
	CellError     = "error"
	CellCancelled = "cancelled"
	CellSkipped   = "skipped" // after a failing or cancelled cell
)

// CellResult is one cell's end (its outputs came as PythonOutput frames).
type CellResult struct {
	Index          int    `json:"index"`
	Title          string `json:"title,omitempty"`
	Status         string `json:"status"`
	ExecutionCount int    `json:"execution_count,omitempty"`
	InputRequested bool   `json:"input_requested,omitempty"`
	Truncated      bool   `json:"truncated,omitempty"`
}

// PythonResult ends a call.
type PythonResult struct {
	Status     string       `json:"status"` // ok, error or cancelled
	Cells      []CellResult `json:"cells"`
	FailedCell int          `json:"failed_cell"` // -1 when none failed
	Cancelled  bool         `json:"cancelled"`
	TimedOut   bool         `json:"timed_out"`
	// Message explains a failure in one sentence: "Command timed out after
	// 30 seconds", "Cell 2 (load data) failed: ZeroDivisionError: division by
	// zero", "The Python kernel crashed twice and was not restarted again."
	Message string `json:"message,omitempty"`
	// KernelRestarted: the session kernel was (re)started during this call;
	// earlier state is gone.
	KernelRestarted bool `json:"kernel_restarted,omitempty"`
}

// PythonControl interrupts or restarts the session kernel.
type PythonControl struct {
	Action string `json:"action"` // "interrupt" or "restart"
}
