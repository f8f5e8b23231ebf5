package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/agent"
)

// Shared types: what a process and a file look like on both sides.
type (
	ExecRequest = agent.ExecStart
	ExecIO      = agent.ExecIO
	ExitStatus  = agent.ExitStatus
	FileInfo    = agent.FileInfo
	Listing     = agent.Listing
	FileWrite   = agent.FileWrite
	FileRead    = agent.FileRead
	Written     = agent.Written
	DataEnd     = agent.DataEnd

	PythonRequest = agent.PythonRequest
	PythonCell    = agent.PythonCell
	PythonOutput  = agent.PythonOutput
	PythonResult  = agent.PythonResult
	CellResult    = agent.CellResult
)

// Millis converts a duration for ExecRequest.Timeout.
var Millis = agent.Millis

// Error kinds a caller may test with errors.Is.
var (
	ErrNotFound   = agent.ErrNotFound
	ErrPathEscape = agent.ErrPathEscape
	ErrNotRegular = agent.ErrNotRegular
	ErrTooLarge   = agent.ErrTooLarge
	ErrNoSpace    = agent.ErrNoSpace
	ErrPermission = agent.ErrPermission
	ErrProcLimit  = agent.ErrProcLimit
	ErrGone       = agent.ErrAgentGone
	ErrInvalid    = agent.ErrInvalid
	ErrNotDir     = agent.ErrNotDir
	ErrIsDir      = agent.ErrIsDir
	ErrExists     = agent.ErrExists
	ErrNotEmpty   = agent.ErrNotEmpty
	ErrLocked     = agent.ErrLocked   // a process in the computer holds a lease on the file
	ErrChanging   = agent.ErrChanging // a snapshot read of a file open for writing
	// ErrUnsupported means the host cannot enforce what a computer needs
	// (a cgroup controller, a namespace, loop devices...).
	ErrUnsupported = errors.New("this host cannot enforce the computer's limits")
	// ErrInvalidSpec reports limits out of range.
	ErrInvalidSpec = errors.New("invalid computer spec")
	// ErrMountSource means a mount's source beneath its Root is not (or is
	// no longer) a directory reached without symlinks.
	ErrMountSource = errors.New("mount source is not a directory beneath its root without symlinks")
)

// Driver creates computers.
type Driver interface {
	// Create starts a computer and returns once its agent answers.
	Create(ctx context.Context, spec Spec) (Sandbox, error)
	// GC removes what crashed owners left behind: processes, cgroups, loop
	// devices, mounts and directories of computers whose owner is gone.
	GC(ctx context.Context) (GCReport, error)
}

// GCReport counts what GC removed.
type GCReport struct {
	Computers int `json:"computers"`
	Cgroups   int `json:"cgroups"`
	Loops     int `json:"loops"`
	Mounts    int `json:"mounts"`
}

// Sandbox is one running computer.
type Sandbox interface {
	ID() string
	Spec() Spec
	// Exec runs a process to completion. Cancelling ctx kills the process
	// tree; Exec returns after it was reaped.
	Exec(ctx context.Context, req ExecRequest, sio ExecIO) (ExitStatus, error)
	WriteFile(ctx context.Context, req FileWrite, r io.Reader) (Written, error)
	ReadFile(ctx context.Context, req FileRead, w io.Writer) (DataEnd, error)
	Stat(ctx context.Context, path string) (FileInfo, error)
	List(ctx context.Context, path string) (Listing, error)
	Mkdir(ctx context.Context, path string, parents bool) error
	Remove(ctx context.Context, path string, recursive bool) error
	// Python runs cells in the computer's kernel; onOutput (may be nil) receives every
	// output as it happens, from one goroutine. Cancelling ctx interrupts the kernel
	// (escalating to a restart) and returns a cancelled result.
	Python(ctx context.Context, req PythonRequest, onOutput func(PythonOutput)) (PythonResult, error)
	// PythonControl interrupts ("interrupt") or restarts ("restart") the session kernel.
	PythonControl(ctx context.Context, action string) error
	// OpenKernel starts a kernel of its own in the computer (not the session
	// kernel) and relays its messages; one per computer at a time.
	OpenKernel(ctx context.Context, start KernelStart) (Kernel, error)
	// Kill SIGKILLs every process in the computer and returns once none of
	// them can run code or make a system call again. It frees nothing:
	// Destroy must still be called. It is idempotent.
	Kill(ctx context.Context) error
	// Destroy kills everything in the computer and removes all its
	// resources. It is idempotent.
	Destroy(ctx context.Context) error
	// Keep stops the computer like Destroy but keeps its workspace, mounted
	// read-write on the host, and returns that path (for debugging).
	Keep(ctx context.Context) (string, error)
	// Done is closed once the computer's agent has exited, whether Kill or
	// Destroy ended it or it died by itself (a crash, a SIGKILL from the
	// host): nothing runs in the computer any more. A nil channel means
	// the driver cannot tell.
	Done() <-chan struct{}
	// ExitReason says how the agent ended ("killed by signal 9 (SIGKILL)"),
	// once Done is closed; "" before.
	ExitReason() string
}

// NetworkMode says what a computer can reach.
type NetworkMode string

// NetworkNone gives a computer only its own loopback interface.
const NetworkNone NetworkMode = "none"

// Mount is an extra bind mount of a host path into the computer. The driver
// resolves Source once, on the host, and binds what it resolved to: a path
// that changes later (a directory swapped for a symlink) cannot redirect the
// mount.
type Mount struct {
	Source   string `json:"source" toml:"source"`
	Target   string `json:"target" toml:"target"`
	ReadOnly bool   `json:"read_only" toml:"read_only"`
	// Root, when set, is a directory whose contents tenants may change (a
	// Kernel Gateway mount root): Source must be a directory that is Root or
	// beneath it, and it is resolved from Root with no symlink, no magic
	// link and no ".." at any step (openat2 RESOLVE_BENEATH |
	// RESOLVE_NO_SYMLINKS). Anything else fails Create with ErrMountSource.
	Root string `json:"root,omitempty" toml:"root"`
}

// Spec is everything a computer is created with.
type Spec struct {
	MemoryBytes int64         `json:"memory_bytes"`
	Pids        int64         `json:"pids"`
	CPUs        float64       `json:"cpus"` // 0: no hard quota, fair share only
	DiskBytes   int64         `json:"disk_bytes"`
	Timeout     time.Duration `json:"timeout"` // default wall time per process
	Network     NetworkMode   `json:"network"`
	Mounts      []Mount       `json:"mounts,omitempty"`
	Env         []string      `json:"env,omitempty"`
}

// Defaults of a computer when nothing else is asked for.
const (
	DefaultMemory  = 512 << 20
	DefaultPids    = 256
	DefaultCPUs    = 1
	DefaultDisk    = 1 << 30
	DefaultTimeout = 30 * time.Second
)

// DefaultSpec is a computer with the default limits.
func DefaultSpec() Spec {
	return Spec{
		MemoryBytes: DefaultMemory, Pids: DefaultPids, CPUs: DefaultCPUs,
		DiskBytes: DefaultDisk, Timeout: DefaultTimeout, Network: NetworkNone,
	}
}

// Validate checks limits and names the first bad field.
func (s Spec) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidSpec, field, fmt.Sprintf(format, args...))
	}
	switch {
	case s.MemoryBytes < 16<<20:
		return bad("memory", "must be at least 16M, got %d bytes", s.MemoryBytes)
	case s.MemoryBytes > 1<<40:
		return bad("memory", "must be at most 1T")
	case s.Pids < 8 || s.Pids > 1<<22:
		return bad("pids", "must be between 8 and 4194304, got %d", s.Pids)
	case s.CPUs < 0 || s.CPUs > 1024:
		return bad("cpus", "must be between 0 and 1024, got %g", s.CPUs)
	case s.CPUs > 0 && s.CPUs < 0.01:
		return bad("cpus", "must be at least 0.01, got %g", s.CPUs)
	case s.DiskBytes < 16<<20:
		return bad("disk", "must be at least 16M, got %d bytes", s.DiskBytes)
	case s.DiskBytes > 1<<42:
		return bad("disk", "must be at most 4T")
	case s.Timeout < 0:
		return bad("timeout", "must not be negative")
	case s.Network != NetworkNone && s.Network != "":
		return bad("network", "only %q is supported", NetworkNone)
	}
	for _, kv := range s.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" || strings.ContainsAny(kv, "\x00") {
			return bad("env", "%q is not NAME=value", kv)
		}
	}
	for _, m := range s.Mounts {
		if !path.IsAbs(m.Source) || !path.IsAbs(m.Target) {
			return bad("mounts", "source and target must be absolute paths: %q -> %q", m.Source, m.Target)
		}
		if path.Clean(m.Target) == "/" || reserved(m.Target) {
			return bad("mounts", "target %q is reserved", m.Target)
		}
		if m.Root != "" && !beneath(m.Root, m.Source) {
			return bad("mounts", "source %q is not beneath its root %q", m.Source, m.Root)
		}
	}
	return nil
}

// beneath reports whether p is root or a path below it (lexically).
func beneath(root, p string) bool {
	if !path.IsAbs(root) || path.Clean(p) != p {
		return false
	}
	r := path.Clean(root)
	return p == r || strings.HasPrefix(p, strings.TrimSuffix(r, "/")+"/")
}

func reserved(target string) bool {
	t := path.Clean(target)
	for _, r := range []string{"/proc", "/dev", "/sys", "/workspace", "/tmp", "/etc"} {
		if t == r || strings.HasPrefix(t, r+"/") {
			return true
		}
	}
	return false
}
