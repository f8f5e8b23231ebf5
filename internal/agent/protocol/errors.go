package protocol

import "errors"

// Sentinel errors for the kinds of failure a caller may want to tell apart.
// They cross the control channel as codes (see WireError) and come back as
// the same sentinels, wrapped with the agent's message.
var (
	ErrNotFound    = errors.New("no such file or directory")
	ErrExists      = errors.New("file exists")
	ErrNotDir      = errors.New("not a directory")
	ErrIsDir       = errors.New("is a directory")
	ErrNotEmpty    = errors.New("directory not empty")
	ErrPathEscape  = errors.New("path escapes the workspace")
	ErrNotRegular  = errors.New("not a regular file")
	ErrPermission  = errors.New("permission denied")
	ErrTooLarge    = errors.New("file too large")
	ErrNoSpace     = errors.New("no space left on the computer's disk")
	ErrInvalid     = errors.New("invalid request")
	ErrProcLimit   = errors.New("process limit reached")
	ErrUnknownProc = errors.New("no such process")
	ErrInternal    = errors.New("agent internal error")
	ErrBusy        = errors.New("busy")
	// ErrLocked means a process in the computer holds the file (a lease
	// that did not break in time); the same call may succeed later.
	ErrLocked = errors.New("the file is locked by a process in the computer (a lease); try again later")
	// ErrChanging refuses a snapshot read of a file that a process in the
	// computer has open for writing.
	ErrChanging = errors.New("the file is open for writing by a process in the computer; try again once it is complete")
	// ErrKernelDead ends a kernel relay whose kernel cannot go on: it
	// crashed too often, could not start, or broke the wire protocol.
	ErrKernelDead = errors.New("kernel dead")
	// ErrKernelBacklog ends a kernel relay whose messages were not taken
	// fast enough (by the host from the agent, or by the consumer).
	ErrKernelBacklog = errors.New("kernel backlog")
	// ErrTooManyProcs refuses a background process past MaxProcs running.
	ErrTooManyProcs = errors.New("too many background processes")
	// ErrStdinClosed: the process's stdin was closed (or it exited).
	ErrStdinClosed = errors.New("the process's stdin is closed")
)

var codes = map[string]error{
	"not_found": ErrNotFound, "exists": ErrExists, "not_dir": ErrNotDir,
	"is_dir": ErrIsDir, "not_empty": ErrNotEmpty, "path_escape": ErrPathEscape,
	"not_regular": ErrNotRegular, "permission": ErrPermission, "too_large": ErrTooLarge,
	"no_space": ErrNoSpace, "invalid": ErrInvalid, "proc_limit": ErrProcLimit,
	"unknown_process": ErrUnknownProc, "internal": ErrInternal,
	"busy": ErrBusy, "kernel_dead": ErrKernelDead, "locked": ErrLocked,
	"changing": ErrChanging, "kernel_backlog": ErrKernelBacklog,
	"too_many_processes": ErrTooManyProcs, "stdin_closed": ErrStdinClosed,
}

// WireError is an error as it travels on the control channel.
type WireError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// ToWire turns an agent-side error into its wire form.
func ToWire(err error) WireError {
	for code, sentinel := range codes {
		if errors.Is(err, sentinel) {
			return WireError{Code: code, Message: err.Error()}
		}
	}
	return WireError{Code: "internal", Message: err.Error()}
}

// FromWire turns a wire error back into a wrapped sentinel.
func FromWire(w WireError) error {
	sentinel, ok := codes[w.Code]
	if !ok {
		sentinel = ErrInternal
	}
	msg := w.Message
	if len(msg) > 1024 {
		msg = msg[:1024]
	}
	if msg == "" || msg == sentinel.Error() {
		return sentinel
	}
	return &codedError{sentinel: sentinel, msg: msg}
}

// WithMessage is sentinel (for errors.Is) with its own message msg.
func WithMessage(sentinel error, msg string) error {
	return &codedError{sentinel: sentinel, msg: msg}
}

type codedError struct {
	sentinel error
	msg      string
}

func (e *codedError) Error() string { return e.msg }
func (e *codedError) Unwrap() error { return e.sentinel }
