package httpapi

import (
	"encoding/json"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/artifact"
	"github.com/cubicle-sandbox/cubicle/internal/tools"
)

// The REST API's own shapes of the service's values: bodies of the layers
// below never reach a client as they are, so a change there (the service's
// types, the sandbox's, the control channel) cannot change a body
// (testdata/golden pins them). Durations are whole seconds or milliseconds
// here, time.Duration below; convert.go is the one place they are
// converted.

// computerLimits are a computer's effective limits.
type computerLimits struct {
	MemoryMB           int64   `json:"memory_mb"`
	CPUs               float64 `json:"cpus"`
	Pids               int64   `json:"pids"`
	DiskMB             int64   `json:"disk_mb"`
	LifetimeSeconds    int     `json:"lifetime_seconds"`
	ExecTimeoutSeconds int     `json:"exec_timeout_seconds"`
	// NetworkPolicy is an internet computer's (absent: loopback only).
	NetworkPolicy *networkPolicy `json:"network_policy,omitempty"`
	// IdleTimeoutSeconds ends it that long after its last call.
	IdleTimeoutSeconds int `json:"idle_timeout_seconds,omitempty"`
	// OnExpire is "pause" for a computer paused when its lifetime or idle
	// time ends (absent: it is deleted).
	OnExpire string `json:"on_expire,omitempty"`
	// Volumes are the volumes it mounts.
	Volumes []volumeMount `json:"volumes,omitempty"`
}

// networkPolicy is a computer's network_policy (OpenAI's container shape,
// with allowed_cidrs as Cubicle's addition; docs/network.md).
type networkPolicy struct {
	Type           string   `json:"type"`
	AllowedDomains []string `json:"allowed_domains,omitempty"`
	AllowedCIDRs   []string `json:"allowed_cidrs,omitempty"`
	// DomainSecrets are OpenAI's domain_secrets: values in a request
	// only, never in an answer (names only).
	DomainSecrets []domainSecret `json:"domain_secrets,omitempty"`
}

// domainSecret is one of a network_policy's domain_secrets.
type domainSecret struct {
	Domain string `json:"domain"`
	Name   string `json:"name"`
	Value  string `json:"value,omitempty"`
}

// computerView is the computer object.
type computerView struct {
	ID        string            `json:"id"`
	Object    string            `json:"object"`
	Status    string            `json:"status"`
	CreatedAt int64             `json:"created_at"`
	ReadyAt   *int64            `json:"ready_at"`
	ExpiresAt int64             `json:"expires_at"`
	StoppedAt *int64            `json:"stopped_at,omitempty"`
	Limits    computerLimits    `json:"limits"`
	Metadata  map[string]string `json:"metadata"`
	Failure   string            `json:"failure,omitempty"`
	Template  string            `json:"template"`
	// LastActiveAt is the last call on a running computer (absent once
	// it stopped).
	LastActiveAt *int64 `json:"last_active_at,omitempty"`
	Name         string `json:"name,omitempty"`
	// PausedAt is when a paused computer was paused; Pauses counts the
	// pauses of a computer paused at least once.
	PausedAt *int64 `json:"paused_at,omitempty"`
	Pauses   int    `json:"pauses,omitempty"`
	// Python, in the answer of a pause or a resume of a computer whose
	// session kernel ran cells: which of its variables were kept (or
	// restored) and which not, with why.
	Python *pythonVariables `json:"python,omitempty"`
}

// pythonVariables is a pause's or resume's report on the session
// kernel's variables.
type pythonVariables struct {
	Kept  []string          `json:"kept"`
	Lost  map[string]string `json:"lost"`
	Error string            `json:"error,omitempty"`
}

// createBody is the body of POST /v1/computers.
type createBody struct {
	MemoryMB           int64             `json:"memory_mb,omitempty"`
	LifetimeSeconds    int               `json:"lifetime_seconds,omitempty"`
	ExecTimeoutSeconds int               `json:"exec_timeout_seconds,omitempty"`
	Metadata           map[string]string `json:"metadata,omitempty"`
	NetworkPolicy      *networkPolicy    `json:"network_policy,omitempty"`
	Template           string            `json:"template,omitempty"`
	IdleTimeoutSeconds int               `json:"idle_timeout_seconds,omitempty"`
	Name               string            `json:"name,omitempty"`
	// ExpiresAfter is OpenAI's form of the idle timeout.
	ExpiresAfter *expiresAfter `json:"expires_after,omitempty"`
	// OnExpire: "delete" (the default) or "pause".
	OnExpire string `json:"on_expire,omitempty"`
	// Volumes mount the organisation's volumes.
	Volumes []volumeMount `json:"volumes,omitempty"`
}

// volumeMount mounts a volume into a computer.
type volumeMount struct {
	Name     string `json:"name"`
	Path     string `json:"path"`
	ReadOnly bool   `json:"read_only,omitempty"`
}

// volumeView is the volume object.
type volumeView struct {
	ID        string   `json:"id"`
	Object    string   `json:"object"`
	Name      string   `json:"name"`
	SizeMB    int64    `json:"size_mb"`
	CreatedAt int64    `json:"created_at"`
	Computers []string `json:"computers"`
}

// createVolumeBody is the body of POST /v1/volumes.
type createVolumeBody struct {
	Name   string `json:"name"`
	SizeMB int64  `json:"size_mb,omitempty"`
}

// expiresAfter is OpenAI's container expires_after: the computer ends
// minutes after its last call.
type expiresAfter struct {
	Anchor  string `json:"anchor"`
	Minutes int    `json:"minutes"`
}

// lifetimeBody is the body of POST /v1/computers/{id}/lifetime.
type lifetimeBody struct {
	LifetimeSeconds int `json:"lifetime_seconds"`
}

// execBody is the body of POST /v1/computers/{id}/exec, with the
// transport's output encoding: "utf-8" (the default: text, invalid bytes
// shown as U+FFFD) or "base64" (lossless: stdout, stderr and every
// streamed data are base64). Its timeout comes under either name
// (callTimeout).
type execBody struct {
	Command        string            `json:"command,omitempty"`
	Argv           []string          `json:"argv,omitempty"`
	Cwd            string            `json:"cwd,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	Stdin          string            `json:"stdin,omitempty"`
	Encoding       string            `json:"encoding,omitempty"`
	TimeoutSeconds *int              `json:"timeout_seconds,omitempty"`
	Timeout        *int              `json:"timeout,omitempty"`
	// Background starts a background process and answers it at once
	// (POST …/processes); CloseStdin closes its stdin after Stdin.
	Background bool `json:"background,omitempty"`
	CloseStdin bool `json:"close_stdin,omitempty"`

	timeout int // seconds, from either name (check)
}

// execAnswer is the answer of an exec (whole, or the "exit" event of a
// streamed one), naming a non-default encoding.
type execAnswer struct {
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

// fileEntry is one file of a listing (GET /v1/computers/{id}/files).
type fileEntry struct {
	Name    string    `json:"name"`
	Path    string    `json:"path"`
	Type    string    `json:"type"`
	Size    int64     `json:"size"`
	Mode    uint32    `json:"mode"`
	ModTime time.Time `json:"mod_time"`
}

// fileListing is the answer of GET /v1/computers/{id}/files: a page
// (first_id and last_id are paths, null on an empty page).
type fileListing struct {
	Data      []fileEntry `json:"data"`
	Object    string      `json:"object"`
	Truncated bool        `json:"truncated"`
	FirstID   *string     `json:"first_id"`
	LastID    *string     `json:"last_id"`
	HasMore   bool        `json:"has_more"`
}

// fileWritten is the answer of PUT /v1/computers/{id}/files/{path}.
type fileWritten struct {
	Bytes int64  `json:"bytes"`
	Path  string `json:"path"`
}

// pythonBody is the body of POST /v1/computers/{id}/python, with its
// timeout under either name (callTimeout).
type pythonBody struct {
	Cells          []pythonCellBody `json:"cells"`
	Cwd            string           `json:"cwd,omitempty"`
	Reset          bool             `json:"reset,omitempty"`
	Mode           string           `json:"mode,omitempty"` // session (default) or per_call
	SaveImages     bool             `json:"save_images,omitempty"`
	TimeoutSeconds *int             `json:"timeout_seconds,omitempty"`
	Timeout        *int             `json:"timeout,omitempty"`
}

// pythonCellBody is one cell of a python body.
type pythonCellBody struct {
	Code  string `json:"code"`
	Title string `json:"title,omitempty"`
}

// pythonOutput is one output of a cell.
type pythonOutput struct {
	Type           string          `json:"type"`
	Name           string          `json:"name,omitempty"`
	Text           string          `json:"text,omitempty"`
	MIME           string          `json:"mime,omitempty"`
	JSON           json.RawMessage `json:"json,omitempty"`
	PNG            []byte          `json:"png,omitempty"` // base64
	Width          int             `json:"width,omitempty"`
	Height         int             `json:"height,omitempty"`
	ExecutionCount int             `json:"execution_count,omitempty"`
	EName          string          `json:"ename,omitempty"`
	EValue         string          `json:"evalue,omitempty"`
	Traceback      []string        `json:"traceback,omitempty"`
	Omitted        []string        `json:"omitted,omitempty"`
	DisplayID      string          `json:"display_id,omitempty"`
}

// pythonCellView is one cell of a python answer.
type pythonCellView struct {
	Index          int            `json:"index"`
	Title          string         `json:"title,omitempty"`
	Status         string         `json:"status"`
	ExecutionCount int            `json:"execution_count,omitempty"`
	InputRequested bool           `json:"input_requested,omitempty"`
	Truncated      bool           `json:"truncated,omitempty"`
	Outputs        []pythonOutput `json:"outputs"`
	Artifacts      []artifact.Ref `json:"artifacts,omitempty"` // images kept with save_images
}

// pythonResult is the answer of a python call (whole, or the "result"
// event of a streamed one, whose outputs are null: they were streamed).
type pythonResult struct {
	Status          string           `json:"status"`
	Cells           []pythonCellView `json:"cells"`
	FailedCell      *int             `json:"failed_cell,omitempty"`
	Cancelled       bool             `json:"cancelled"`
	TimedOut        bool             `json:"timed_out"`
	Message         string           `json:"message,omitempty"`
	KernelRestarted bool             `json:"kernel_restarted,omitempty"`
	DurationMS      int64            `json:"duration_ms"`
}

// pythonOutputEvent is the data of a python call's "output" event.
type pythonOutputEvent struct {
	Cell   int          `json:"cell"`
	Output pythonOutput `json:"output"`
}

// toolImage is an image on the wire.
type toolImage struct {
	PNG    []byte `json:"png"`
	Width  int    `json:"width"`
	Height int    `json:"height"`
}

// toolAnswer is the answer of a tool call.
type toolAnswer struct {
	Output    string             `json:"output"`
	IsError   bool               `json:"is_error"`
	Images    []toolImage        `json:"images"`
	Artifacts []artifact.Ref     `json:"artifacts"`
	Cells     []toolCell         `json:"cells,omitempty"`
	Outputs   []tools.CodeOutput `json:"outputs,omitempty"` // code_interpreter's OpenAI-shaped outputs
}

// toolCell is one cell of the python tool's answer.
type toolCell struct {
	Index   int            `json:"index"`
	Status  string         `json:"status"`
	Outputs []pythonOutput `json:"outputs"`
}

// processView is a background process (POST/GET …/processes…).
type processView struct {
	ID         string   `json:"id"`
	Object     string   `json:"object"` // "process"
	Pid        int      `json:"pid"`
	Command    string   `json:"command,omitempty"`
	Argv       []string `json:"argv,omitempty"`
	Cwd        string   `json:"cwd"`
	Status     string   `json:"status"`    // running, exited
	ExitCode   *int     `json:"exit_code"` // null while running; -1 when a signal ended it
	Signal     int      `json:"signal,omitempty"`
	TimedOut   bool     `json:"timed_out"`
	OOMKilled  bool     `json:"oom_killed"`
	StartedAt  int64    `json:"started_at"`
	EndedAt    *int64   `json:"ended_at"`
	DurationMS *int64   `json:"duration_ms,omitempty"`
	StdinOpen  bool     `json:"stdin_open"`
	// The computer holds the output bytes [OutputStart, OutputEnd).
	OutputStart int64 `json:"output_start"`
	OutputEnd   int64 `json:"output_end"`
}

// processOutput is the answer of GET …/processes/{pid}/output: the
// bytes [Offset, NextOffset) of the output, by stream; Dropped bytes
// before Offset (from the offset asked for) were no longer held.
type processOutput struct {
	Object     string      `json:"object"` // "process.output"
	Offset     int64       `json:"offset"`
	Dropped    int64       `json:"dropped"`
	NextOffset int64       `json:"next_offset"`
	Stdout     string      `json:"stdout"`
	Stderr     string      `json:"stderr"`
	Encoding   string      `json:"encoding,omitempty"`
	Process    processView `json:"process"`
}

// stdinBody is the body of POST …/processes/{pid}/stdin.
type stdinBody struct {
	Data     string `json:"data"`
	Encoding string `json:"encoding,omitempty"` // utf-8 (default) or base64
	Close    bool   `json:"close,omitempty"`
}

// stdinAnswer says how many bytes the process took and whether its stdin
// is closed.
type stdinAnswer struct {
	Written int  `json:"written"`
	Closed  bool `json:"closed"`
}

// signalBody is the body of POST …/processes/{pid}/signal.
type signalBody struct {
	Signal string `json:"signal"`
}

// droppedEvent is the SSE event that says bytes were lost before Offset.
type droppedEvent struct {
	Offset  int64 `json:"offset"`
	Dropped int64 `json:"dropped"`
}

// scriptBody is the body of POST /v1/scripts and PUT /v1/scripts/{name}
// (whose name, if given, must be the path's).
type scriptBody struct {
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	// Interpreter is the program and options the source's file is given
	// to (absent: ["/bin/sh"]).
	Interpreter    []string `json:"interpreter,omitempty"`
	Source         string   `json:"source"`
	TimeoutSeconds *int     `json:"timeout_seconds,omitempty"`
}

// scriptView is the script object; Source is absent from lists.
type scriptView struct {
	Object         string          `json:"object"`
	Name           string          `json:"name"`
	Tool           string          `json:"tool"`
	Description    string          `json:"description"`
	InputSchema    json.RawMessage `json:"input_schema"`
	Interpreter    []string        `json:"interpreter"`
	Source         *string         `json:"source,omitempty"`
	TimeoutSeconds *int            `json:"timeout_seconds"`
	Version        int             `json:"version"`
	CreatedAt      int64           `json:"created_at"`
	UpdatedAt      int64           `json:"updated_at"`
}
