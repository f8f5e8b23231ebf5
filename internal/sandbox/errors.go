package sandbox

import (
	"errors"
	"fmt"
	"strings"
)

// Error kinds a caller may test with errors.Is. A driver returns them
// wrapped with its own message (the path, the limit).
var (
	ErrNotFound   = errors.New("no such file or directory")
	ErrExists     = errors.New("file exists")
	ErrNotDir     = errors.New("not a directory")
	ErrIsDir      = errors.New("is a directory")
	ErrNotEmpty   = errors.New("directory not empty")
	ErrPathEscape = errors.New("path escapes the workspace")
	ErrNotRegular = errors.New("not a regular file")
	ErrPermission = errors.New("permission denied")
	ErrTooLarge   = errors.New("file too large")
	ErrNoSpace    = errors.New("no space left on the computer's disk")
	ErrInvalid    = errors.New("invalid request")
	ErrProcLimit  = errors.New("process limit reached")
	// ErrLocked: a process in the computer holds a lease on the file; the
	// same call may succeed later.
	ErrLocked = errors.New("the file is locked by a process in the computer (a lease); try again later")
	// ErrChanging refuses a snapshot read of a file that a process in the
	// computer has open for writing.
	ErrChanging = errors.New("the file is open for writing by a process in the computer; try again once it is complete")
	// ErrNoProcess: the computer holds no background process of that id.
	ErrNoProcess = errors.New("no such process")
	// ErrTooManyProcesses: the computer runs as many background processes
	// as it may.
	ErrTooManyProcesses = errors.New("too many background processes")
	// ErrStdinClosed: the process's stdin was closed, or it exited.
	ErrStdinClosed = errors.New("the process's stdin is closed")
	// ErrGone: the computer's agent is gone (it died or was killed).
	ErrGone = errors.New("the computer's agent is gone")

	// ErrUnsupported means the host cannot enforce what a computer needs
	// (a cgroup controller, a namespace, loop devices...).
	ErrUnsupported = errors.New("this host cannot enforce the computer's limits")
	// ErrInvalidSpec reports limits out of range.
	ErrInvalidSpec = errors.New("invalid computer spec")
	// ErrMountSource means a mount's source beneath its Root is not (or is
	// no longer) a directory reached without symlinks.
	ErrMountSource = errors.New("mount source is not a directory beneath its root without symlinks")
)

// Why a kernel relay ended (Kernel.Err) or could not open.
var (
	ErrKernelClosed = errors.New("kernel relay closed") // Close was called
	// ErrKernelBacklog: Messages was not read fast enough.
	ErrKernelBacklog = errors.New("the client did not read the kernel's messages fast enough; the relay was closed")
	// ErrKernelDead: the kernel crashed too often, could not start, or
	// broke the protocol.
	ErrKernelDead = errors.New("kernel dead")
	// ErrKernelBusy: the computer already has a relay open.
	ErrKernelBusy = errors.New("busy")
)

// FilesLimited is the detail of a file over a deployment's byte limit
// ("files are limited to 1048576 bytes"): a computer's files
// (internal/computer) and uploads (internal/httpapi) say it alike.
func FilesLimited(limit int64) string { return fmt.Sprintf("files are limited to %d bytes", limit) }

// MaxPathLen is the longest path a file call may name (Linux's PATH_MAX).
const MaxPathLen = 4096

// CheckPath refuses a path that no file call may name: longer than
// MaxPathLen, or with a NUL byte (ErrInvalid).
func CheckPath(p string) error {
	switch {
	case len(p) > MaxPathLen:
		return fmt.Errorf("%w: the path is %d bytes; a path has at most %d", ErrInvalid, len(p), MaxPathLen)
	case strings.IndexByte(p, 0) >= 0:
		return fmt.Errorf("%w: the path contains a NUL byte", ErrInvalid)
	}
	return nil
}
