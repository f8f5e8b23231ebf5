package sandbox

import (
	"encoding/json"
	"io"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/kernel"
)

// ExecRequest starts a process. Exactly one of Argv and Command is set;
// Command runs through /bin/sh -c.
type ExecRequest struct {
	Argv    []string
	Command string
	Env     []string // NAME=value, on top of the computer's
	Cwd     string
	Timeout time.Duration // 0: the computer's default
}

// ExecIO connects a process's standard streams. Nil Stdin means /dev/null;
// nil Stdout or Stderr discards. Writers are called from the caller's
// goroutine, never concurrently.
type ExecIO struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Started, when set, is called once the process runs, with its pid
	// inside the computer.
	Started func(pid int)
}

// ExitStatus is how a process ended.
type ExitStatus struct {
	ExitCode  int // -1 when killed by a signal
	Signal    int
	TimedOut  bool
	OOMKilled bool
	Duration  time.Duration
}

// FileInfo describes one file inside the workspace.
type FileInfo struct {
	Name    string
	Path    string // absolute path inside the computer
	Type    string // file, dir, symlink, fifo, socket, device
	Size    int64
	Mode    uint32 // permission bits
	ModTime time.Time
}

// Listing is a directory's entries.
type Listing struct {
	Entries   []FileInfo
	Truncated bool
}

// FileWrite starts a file upload.
type FileWrite struct {
	Path    string
	Mode    uint32
	Parents bool
}

// FileRead asks for a file's content, at most Limit bytes.
type FileRead struct {
	Path  string
	Limit int64
	// Snapshot asks for the file as it was when the read started: a
	// process opening it for writing waits until the read is done, and a
	// file a process has open for writing is refused with ErrChanging.
	Snapshot bool
}

// Written is a completed upload.
type Written struct {
	Path  string
	Bytes int64
}

// DataEnd ends a file read.
type DataEnd struct {
	Path      string
	Size      int64 // the file's full size
	Truncated bool
	// Changed: the file was modified while it was read, so what was sent
	// may mix old and new content (never with a Snapshot).
	Changed bool
}

// TarWrite extracts a tar archive into the directory Path of the
// workspace (created with its parents when missing), as the sandbox user.
// Regular files, directories and symlinks are extracted, with their
// permission bits (setuid, setgid and sticky bits dropped) and mtimes; no
// symlink, in the archive or already in the workspace, is ever followed.
// Absolute names, "..", hard links, devices and FIFOs are refused
// (ErrInvalid, naming the entry); entries before a refused one stay.
// MaxBytes bounds the sum of the files' sizes, MaxEntries the number of
// entries (ErrTooLarge).
type TarWrite struct {
	Path       string
	MaxBytes   int64
	MaxEntries int
}

// TarRead asks for the directory Path as a tar archive: regular files,
// directories and symlinks (as symlinks), with modes and mtimes; sockets,
// FIFOs and devices are left out. Over MaxEntries entries or MaxBytes
// bytes of files, it is refused before any byte is written.
type TarRead struct {
	Path       string
	MaxBytes   int64
	MaxEntries int
}

// TarDone is a finished tar transfer: the directory (absolute path in
// the computer), its entries and the bytes of its files.
type TarDone struct {
	Path    string
	Entries int
	Bytes   int64
}

// Python execution modes.
const (
	ModeSession = "session"  // one kernel per computer, reused, calls serialized
	ModePerCall = "per_call" // a fresh kernel for this call, discarded after
)

// PythonCell is one cell of a call.
type PythonCell struct {
	Code  string
	Title string
}

// PythonRequest runs cells in order in one kernel.
type PythonRequest struct {
	Cells   []PythonCell
	Timeout time.Duration // the whole call
	Cwd     string
	Reset   bool   // restart the session kernel before the first cell
	Mode    string // ModeSession (default) or ModePerCall
	// Prelude runs in every new kernel before its first cell (imports).
	Prelude string
	// MaxOutput caps each cell's outputs in bytes (0: the agent's default).
	MaxOutput int64
}

// PythonOutput is one output of one cell, delivered as it happens.
type PythonOutput struct {
	Cell   int
	Output kernel.Output
}

// Cell statuses.
const (
	CellOK        = "ok"
	CellError     = "error"
	CellCancelled = "cancelled"
	CellSkipped   = "skipped" // after a failing or cancelled cell
)

// CellResult is one cell's end (its outputs came as PythonOutputs).
type CellResult struct {
	Index          int
	Title          string
	Status         string
	ExecutionCount int
	InputRequested bool
	Truncated      bool
}

// PythonResult ends a call.
type PythonResult struct {
	Status     string // ok, error or cancelled
	Cells      []CellResult
	FailedCell int // -1 when none failed
	Cancelled  bool
	TimedOut   bool
	// Message explains a failure in one sentence ("Cell 2 (load data)
	// failed: ZeroDivisionError: division by zero").
	Message string
	// KernelRestarted: the session kernel was (re)started during this call;
	// earlier state is gone.
	KernelRestarted bool
}

// KernelStart starts a relayed kernel.
type KernelStart struct {
	Env []string // NAME=value, already filtered by the caller
	Cwd string   // default /workspace
	// RestartLimit is how many crashes in a row (each within 10 s of the
	// previous restart) are followed by an automatic restart; the next one
	// ends the relay with status "dead". 0 means 5, jupyter_client's.
	RestartLimit int
}

// KernelMessage is one Jupyter message: its four JSON parts unchanged,
// binary buffers and the channel it travels on (shell, control, stdin,
// iopub).
type KernelMessage struct {
	Channel      string
	Header       json.RawMessage
	ParentHeader json.RawMessage
	Metadata     json.RawMessage
	Content      json.RawMessage
	Buffers      [][]byte
}

// ProcessStart starts a background process: it runs like an ExecRequest's
// (same user, cgroup, limits) but is held by the computer, not by the
// call, until it exits or the computer ends. Timeout 0: none. Its stdin is
// a pipe that stays open until closed; Stdin is written to it first, and
// CloseStdin closes it after.
type ProcessStart struct {
	Argv       []string
	Command    string
	Env        []string // NAME=value, on top of the computer's
	Cwd        string
	Timeout    time.Duration
	Stdin      []byte
	CloseStdin bool
}

// ProcessInfo describes a background process.
type ProcessInfo struct {
	ID        string // "proc_<n>", unique in its computer
	Pid       int    // inside the computer
	Argv      []string
	Command   string
	Cwd       string
	Running   bool
	Exit      ExitStatus // once it is not Running
	StartedAt time.Time
	EndedAt   time.Time // zero while Running
	StdinOpen bool
	// The computer holds the output bytes [OutputStart, OutputEnd); an
	// offset counts stdout and stderr together from the process's start.
	OutputStart, OutputEnd int64
}

// OutputRequest reads a background process's output from Offset: at most
// Limit bytes (0: all the computer holds), or with Follow everything until
// the process exited (or the call is cancelled).
type OutputRequest struct {
	ID     string
	Offset int64
	Limit  int64
	Follow bool
}

// OutputIO receives a process's output, from one goroutine. Mark is told,
// first and again whenever bytes were lost, the offset of the bytes that
// follow and how many before it were lost (dropped from the ring).
type OutputIO struct {
	Stdout, Stderr io.Writer
	Mark           func(offset, dropped int64)
}

// OutputEnd ends an output read: Next is the offset after the last byte
// sent, Process the process then.
type OutputEnd struct {
	Next    int64
	Process ProcessInfo
}

// StdinWrite writes Data to a background process's stdin (what it does not
// read within a few seconds is not written), then closes it with Close.
type StdinWrite struct {
	ID    string
	Data  []byte
	Close bool
}

// StdinResult says how many bytes were written and whether stdin is closed.
type StdinResult struct {
	Written int
	Closed  bool
}

// MaxStdinWrite bounds the bytes of one write to a background process's
// stdin (StdinWrite.Data, ProcessStart.Stdin).
const MaxStdinWrite = 256 << 10

// Signals are the signals a background process may be sent, by name, with
// their Linux numbers.
var Signals = map[string]int{
	"SIGHUP": 1, "SIGINT": 2, "SIGQUIT": 3, "SIGKILL": 9, "SIGUSR1": 10,
	"SIGUSR2": 12, "SIGTERM": 15, "SIGCONT": 18, "SIGSTOP": 19,
}

// SIGKILL is Signals["SIGKILL"].
const SIGKILL = 9

// ProcessOutputRing is how many bytes of a background process's output
// (stdout and stderr together) a computer keeps: the newest ones.
const ProcessOutputRing = 1 << 20
