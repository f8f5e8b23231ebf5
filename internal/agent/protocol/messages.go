package protocol

import "time"

// Init is the bootstrap configuration the host sends as the first frame. The
// linux driver consumes it before the namespaces are finished; the agent
// server keeps what it needs at run time.
type Init struct {
	Hostname   string    `json:"hostname"`
	RootDir    string    `json:"root_dir"`             // empty host directory to build the new root on
	Host       HostFDs   `json:"host_fds"`             // the mounts the host made for the computer
	TmpBytes   int64     `json:"tmp_bytes"`            // size of the /tmp tmpfs
	ShmBytes   int64     `json:"shm_bytes"`            // size of the /dev/shm tmpfs
	Mounts     []Mount   `json:"mounts"`               // extra bind mounts
	Env        []string  `json:"env"`                  // default environment of every process
	Cgroup     CgroupFDs `json:"cgroup"`               // inherited descriptors for process placement
	Timeout    Duration  `json:"timeout"`              // default wall-time limit per process
	MaxFile    int64     `json:"max_file"`             // largest file the file API writes or reads
	MemoryHint int64     `json:"memory_hint"`          // memory limit at the start, for messages when the cgroup's cannot be read
	Nameserver string    `json:"nameserver,omitempty"` // the resolver of an internet computer ("": no network)
	CACert     string    `json:"ca_cert,omitempty"`    // PEM of the computer's own CA, added to its system trust store
	Seccomp    []byte    `json:"seccomp"`              // the seccomp filter of user code, as the host compiled it (struct sock_filter[])
	// RootImage: Host.Runtime is a template's image, the computer's whole
	// root (read-only, with mount points for /dev, /proc, /tmp,
	// /workspace and the generated /etc files), not the host's root that
	// the runtime paths are bound from.
	RootImage bool `json:"root_image,omitempty"`
	// Build: a template build's computer. Host.Runtime is a writable
	// overlay over the template's image (made by the host), and processes
	// run as root of the computer's user namespace, keeping BuildCaps.
	Build bool `json:"build,omitempty"`
	// Python is the kernel's python3 (with ipykernel), a path inside the
	// computer; "" when the computer has none.
	Python string `json:"python,omitempty"`
}

// HostFDs are the agent's descriptors of the detached mounts that the host
// made for the computer, which a process in the computer's user namespace
// cannot make: its /dev (a tmpfs holding the device nodes), its workspace
// disk, and a mount of the host's root filesystem named "runtime" that the
// runtime is bound from (0 when the host's / is no block device: the
// runtime is bound from the host's paths).
type HostFDs struct {
	Dev       int `json:"dev"`
	Workspace int `json:"workspace"`
	Runtime   int `json:"runtime,omitempty"`
}

// Mount is an extra bind mount from the host into the computer: FD is the
// agent's descriptor of a detached mount tree the host already resolved
// (open_tree), attached at Target; Source names it in messages only.
type Mount struct {
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"read_only"`
	FD       int    `json:"fd"`
}

// CgroupFDs are descriptor numbers (inherited by the agent) of cgroup
// directories. A new process is moved into every Place directory, and into a
// fresh leaf under Track (named p<id>) so that all its descendants can be
// found and killed. OOM is a memory.oom_control (v1) or memory.events (v2)
// file whose oom_kill counter is read before and after a process.
type CgroupFDs struct {
	Place []int `json:"place"`
	Track int   `json:"track"`
	// TrackPlaces is true when Track is itself one of the hierarchies a process
	// must join (cgroup v2, or the pids hierarchy on v1): then the leaf replaces
	// the plain placement in that hierarchy.
	TrackPlaces bool `json:"track_places"`
	OOM         int  `json:"oom"`
	// Kill is true when the leaf has cgroup.kill (cgroup v2 since Linux 5.14).
	Kill bool `json:"kill"`
}

// Duration is a time.Duration that travels as milliseconds.
type Duration int64

// D converts to time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) * time.Millisecond }

// Millis converts from time.Duration, rounding up so a tiny timeout never becomes zero.
func Millis(d time.Duration) Duration {
	return Duration((d + time.Millisecond - 1) / time.Millisecond)
}

// Ready is the agent's answer to Init.
type Ready struct {
	Pid int `json:"pid"` // the agent's pid in the host's namespace is known to the host; this is 1
}

// ExecStart asks the agent to start a process. Exactly one of Argv and
// Command is set; Command runs through /bin/sh -c.
type ExecStart struct {
	Argv    []string `json:"argv,omitempty"`
	Command string   `json:"command,omitempty"`
	Env     []string `json:"env,omitempty"`
	Cwd     string   `json:"cwd,omitempty"`
	Stdin   bool     `json:"stdin"` // false: stdin is /dev/null
	Timeout Duration `json:"timeout,omitempty"`
	// Pty runs the process on a pseudo-terminal of this size (see
	// KindPtyResize); nil: pipes.
	Pty *PtySize `json:"pty,omitempty"`
}

// Started confirms a process runs.
type Started struct {
	Pid int `json:"pid"`
}

// ExitStatus ends a process's stream.
type ExitStatus struct {
	ExitCode  int      `json:"exit_code"` // -1 when killed by a signal
	Signal    int      `json:"signal,omitempty"`
	TimedOut  bool     `json:"timed_out,omitempty"`
	OOMKilled bool     `json:"oom_killed,omitempty"`
	Duration  Duration `json:"duration_ms"`
}

// SignalRequest sends a signal to a process's whole tree.
type SignalRequest struct {
	Signal int `json:"signal"`
}

// FileWrite starts a file upload; content follows as KindData frames.
type FileWrite struct {
	Path    string `json:"path"`
	Mode    uint32 `json:"mode"`
	Parents bool   `json:"parents"`
}

// FileRead asks for a file's content, at most Limit bytes.
type FileRead struct {
	Path  string `json:"path"`
	Limit int64  `json:"limit"`
	// Snapshot asks for the file as it was when the read started: the
	// agent holds a read lease while it reads (a process opening the file
	// for writing waits until the read is done), and refuses with
	// ErrChanging a file that a process has open for writing.
	Snapshot bool `json:"snapshot,omitempty"`
}

// PathRequest is stat, list, mkdir and remove.
type PathRequest struct {
	Path      string `json:"path"`
	Parents   bool   `json:"parents,omitempty"`   // mkdir -p
	Recursive bool   `json:"recursive,omitempty"` // rm -r
}

// FileInfo describes one file inside the workspace.
type FileInfo struct {
	Name    string    `json:"name"`
	Path    string    `json:"path"` // absolute path inside the computer
	Type    string    `json:"type"` // file, dir, symlink, fifo, socket, device
	Size    int64     `json:"size"`
	Mode    uint32    `json:"mode"` // permission bits
	ModTime time.Time `json:"mod_time"`
}

// Listing is the reply to KindList.
type Listing struct {
	Entries   []FileInfo `json:"entries"`
	Truncated bool       `json:"truncated"`
}

// Written is the reply to a completed KindFileWrite.
type Written struct {
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
}

// DataEnd ends a file read.
type DataEnd struct {
	Path      string `json:"path"`
	Size      int64  `json:"size"` // the file's full size
	Truncated bool   `json:"truncated"`
	// Changed: the file was modified while it was read, so what was sent
	// may mix old and new content (never with a Snapshot that held its
	// lease to the end).
	Changed bool `json:"changed,omitempty"`
}
