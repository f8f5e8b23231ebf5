package httpapi

import (
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/kernel"
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
}

// createBody is the body of POST /v1/computers.
type createBody struct {
	MemoryMB           int64             `json:"memory_mb,omitempty"`
	LifetimeSeconds    int               `json:"lifetime_seconds,omitempty"`
	ExecTimeoutSeconds int               `json:"exec_timeout_seconds,omitempty"`
	Metadata           map[string]string `json:"metadata,omitempty"`
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

// fileListing is the answer of GET /v1/computers/{id}/files.
type fileListing struct {
	Data      []fileEntry `json:"data"`
	Object    string      `json:"object"`
	Truncated bool        `json:"truncated"`
}

// fileWritten is the answer of PUT /v1/computers/{id}/files/{path}.
type fileWritten struct {
	Bytes int64  `json:"bytes"`
	Path  string `json:"path"`
}

// pythonOutputEvent is the data of a python call's "output" event.
type pythonOutputEvent struct {
	Cell   int           `json:"cell"`
	Output kernel.Output `json:"output"`
}
