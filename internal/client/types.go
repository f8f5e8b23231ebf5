package client

import "encoding/json"

// The client's own request and answer types: what the API sends and
// accepts, decoded here (the server's Go types are not imported).

// Limits are a computer's effective limits.
type Limits struct {
	MemoryMB           int64   `json:"memory_mb"`
	CPUs               float64 `json:"cpus"`
	Pids               int64   `json:"pids"`
	DiskMB             int64   `json:"disk_mb"`
	LifetimeSeconds    int     `json:"lifetime_seconds"`
	ExecTimeoutSeconds int     `json:"exec_timeout_seconds"`
	IdleTimeoutSeconds int     `json:"idle_timeout_seconds,omitempty"`
	OnExpire           string  `json:"on_expire,omitempty"`
}

// Computer is the computer object.
type Computer struct {
	ID        string            `json:"id"`
	Object    string            `json:"object"`
	Status    string            `json:"status"`
	CreatedAt int64             `json:"created_at"`
	ReadyAt   *int64            `json:"ready_at"`
	ExpiresAt int64             `json:"expires_at"`
	StoppedAt *int64            `json:"stopped_at,omitempty"`
	Limits    Limits            `json:"limits"`
	Metadata  map[string]string `json:"metadata"`
	Failure   string            `json:"failure,omitempty"`
	Template  string            `json:"template"`
	// LastActiveAt is the last call on a running computer.
	LastActiveAt *int64 `json:"last_active_at,omitempty"`
	// PausedAt is when a paused computer was paused; Pauses counts its
	// pauses.
	PausedAt *int64 `json:"paused_at,omitempty"`
	Pauses   int    `json:"pauses,omitempty"`
}

// CreateRequest is the body of POST /v1/computers; zero fields are the
// server's defaults.
type CreateRequest struct {
	MemoryMB           int64             `json:"memory_mb,omitempty"`
	LifetimeSeconds    int               `json:"lifetime_seconds,omitempty"`
	ExecTimeoutSeconds int               `json:"exec_timeout_seconds,omitempty"`
	Metadata           map[string]string `json:"metadata,omitempty"`
	Template           string            `json:"template,omitempty"`
}

// ExecRequest is the body of POST /v1/computers/{id}/exec: exactly one of
// Command and Argv.
type ExecRequest struct {
	Command        string            `json:"command,omitempty"`
	Argv           []string          `json:"argv,omitempty"`
	Cwd            string            `json:"cwd,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	Stdin          string            `json:"stdin,omitempty"`
	TimeoutSeconds int               `json:"timeout_seconds,omitempty"`
	Encoding       string            `json:"encoding,omitempty"` // "utf-8" (default) or "base64"
}

// ExecResult is the answer of an exec (the exit event of a stream, whose
// Stdout and Stderr are empty: they came as ExecOutput).
type ExecResult struct {
	ExitCode        int    `json:"exit_code"`
	Signal          int    `json:"signal,omitempty"`
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	TimedOut        bool   `json:"timed_out"`
	OOMKilled       bool   `json:"oom_killed"`
	DurationMS      int64  `json:"duration_ms"`
	StdoutTruncated bool   `json:"stdout_truncated"`
	StderrTruncated bool   `json:"stderr_truncated"`
	Encoding        string `json:"encoding,omitempty"`
}

// ExecOutput is one stdout or stderr event of a streamed exec.
type ExecOutput struct {
	Stream string // "stdout" or "stderr"
	Data   string // as the request's encoding says
}

// Cell is one cell of a python call.
type Cell struct {
	Code  string `json:"code"`
	Title string `json:"title,omitempty"`
}

// PythonRequest is the body of POST /v1/computers/{id}/python.
type PythonRequest struct {
	Cells      []Cell `json:"cells"`
	Timeout    int    `json:"timeout,omitempty"` // seconds; 0: the server's default
	Cwd        string `json:"cwd,omitempty"`
	Reset      bool   `json:"reset,omitempty"`
	Mode       string `json:"mode,omitempty"` // session (default) or per_call
	SaveImages bool   `json:"save_images,omitempty"`
}

// Output types of Output.Type.
const (
	OutStream    = "stream"
	OutDisplay   = "display_data"
	OutResult    = "execute_result"
	OutUpdate    = "update_display_data"
	OutError     = "error"
	OutClear     = "clear_output"
	OutInput     = "input_request"
	OutTruncated = "truncated"
)

// Output is one output of a cell.
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

// PythonOutput is one output event of a streamed python call.
type PythonOutput struct {
	Cell   int    `json:"cell"`
	Output Output `json:"output"`
}

// Artifact is an image kept with save_images.
type Artifact struct {
	ID       string `json:"id"`
	Filename string `json:"filename"`
	Bytes    int64  `json:"bytes"`
}

// CellResult is one cell of a python answer.
type CellResult struct {
	Index          int        `json:"index"`
	Title          string     `json:"title,omitempty"`
	Status         string     `json:"status"`
	ExecutionCount int        `json:"execution_count,omitempty"`
	InputRequested bool       `json:"input_requested,omitempty"`
	Truncated      bool       `json:"truncated,omitempty"`
	Outputs        []Output   `json:"outputs"`
	Artifacts      []Artifact `json:"artifacts,omitempty"`
}

// PythonResult is the answer of a python call.
type PythonResult struct {
	Status          string       `json:"status"`
	Cells           []CellResult `json:"cells"`
	FailedCell      *int         `json:"failed_cell,omitempty"`
	Cancelled       bool         `json:"cancelled"`
	TimedOut        bool         `json:"timed_out"`
	Message         string       `json:"message,omitempty"`
	KernelRestarted bool         `json:"kernel_restarted,omitempty"`
	DurationMS      int64        `json:"duration_ms"`
}
