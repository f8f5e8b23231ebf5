package protocol

import "time"

// Background process frames. A background process is not bound to a
// stream: the agent holds it (and a bounded ring of its output) until it
// is forgotten, and each request about it is a stream of its own.
//
//   - KindProcStart (JSON ProcStart) starts one; the answer is KindOK (JSON
//     ProcInfo) once it runs, or KindError.
//   - KindProcList (empty) answers KindOK (JSON ProcList).
//   - KindProcGet (JSON ProcRef) answers KindOK (JSON ProcInfo).
//   - KindProcOutput (JSON ProcOutput) answers with KindOK (JSON ProcMark:
//     where the bytes that follow start, and how many before them were
//     lost), KindStdout and KindStderr frames, another KindOK ProcMark
//     whenever bytes were lost while a follower lagged, and finally
//     KindDataEnd (JSON ProcOutputEnd), or KindError. A follower ends when
//     the process exited and everything was sent, or at KindProcDetach
//     (host, empty) on its stream.
//   - KindProcStdin (JSON ProcStdin) answers KindOK (JSON ProcStdinResult).
//   - KindProcSignal (JSON ProcSignal) answers KindOK (JSON ProcInfo),
//     after waiting up to Wait for the process to exit.
const (
	KindProcStart  Kind = iota + 20 // JSON ProcStart
	KindProcList                    // empty
	KindProcGet                     // JSON ProcRef
	KindProcOutput                  // JSON ProcOutput
	KindProcDetach                  // empty, on a KindProcOutput stream
	KindProcStdin                   // JSON ProcStdin
	KindProcSignal                  // JSON ProcSignal
)

// Bounds of background processes, per computer.
const (
	// MaxProcs is how many background processes a computer's agent holds,
	// running or exited; an exited one is forgotten (the oldest first) to
	// make room for a new one.
	MaxProcs = 32
	// ProcRing is how many bytes of a process's output (stdout and stderr
	// together) the agent keeps: the newest ones.
	ProcRing = 1 << 20
	// ProcRingSwitches bounds how many switches between stdout and stderr
	// the ring remembers; past it the oldest bytes are dropped as if the
	// ring were full.
	ProcRingSwitches = 4096
	// MaxProcStdin bounds the bytes of one ProcStdin (and of ProcStart's).
	MaxProcStdin = 256 << 10
	// ProcRetention is how long an exited process stays readable (unless
	// new processes need its place sooner).
	ProcRetention = 30 * time.Minute
	// ProcStdinWait is how long a stdin write waits for the process to
	// read; what it did not take is not written.
	ProcStdinWait = 5 * time.Second
)

// ProcStart starts a background process: an ExecStart (Timeout 0: none)
// whose stdin is a pipe that stays open until closed (ProcStdin.Close) or
// the process exits. Stdin, if any, is written to it first; CloseStdin
// closes it after.
type ProcStart struct {
	Argv       []string `json:"argv,omitempty"`
	Command    string   `json:"command,omitempty"`
	Env        []string `json:"env,omitempty"`
	Cwd        string   `json:"cwd,omitempty"`
	Timeout    Duration `json:"timeout,omitempty"`
	Stdin      []byte   `json:"stdin,omitempty"`
	CloseStdin bool     `json:"close_stdin,omitempty"`
}

// ProcInfo describes a background process.
type ProcInfo struct {
	ID        string      `json:"id"`
	Pid       int         `json:"pid"` // inside the computer
	Argv      []string    `json:"argv,omitempty"`
	Command   string      `json:"command,omitempty"`
	Cwd       string      `json:"cwd"`
	Running   bool        `json:"running"`
	Exit      *ExitStatus `json:"exit,omitempty"` // once it exited
	StartedAt time.Time   `json:"started_at"`
	EndedAt   time.Time   `json:"ended_at,omitzero"`
	StdinOpen bool        `json:"stdin_open"`
	// The ring holds the output bytes [OutputStart, OutputEnd): offsets
	// count stdout and stderr together from the process's start.
	OutputStart int64 `json:"output_start"`
	OutputEnd   int64 `json:"output_end"`
}

// ProcList is every process the agent holds, oldest first.
type ProcList struct {
	Procs []ProcInfo `json:"procs"`
}

// ProcRef names a process.
type ProcRef struct {
	ID string `json:"id"`
}

// ProcOutput asks for a process's output from Offset: at most Limit bytes
// (0 or more than ProcRing: ProcRing), or, with Follow, everything until
// the process exited.
type ProcOutput struct {
	ID     string `json:"id"`
	Offset int64  `json:"offset"`
	Limit  int64  `json:"limit,omitempty"`
	Follow bool   `json:"follow,omitempty"`
}

// ProcMark says where the bytes that follow start and how many bytes
// before them were lost (no longer in the ring when they were asked for).
type ProcMark struct {
	Offset  int64 `json:"offset"`
	Dropped int64 `json:"dropped"`
}

// ProcOutputEnd ends an output stream: Next is the offset after the last
// byte sent; Proc the process as it is then.
type ProcOutputEnd struct {
	Next int64    `json:"next"`
	Proc ProcInfo `json:"proc"`
}

// ProcStdin writes Data to a process's stdin, then closes it with Close.
type ProcStdin struct {
	ID    string `json:"id"`
	Data  []byte `json:"data,omitempty"`
	Close bool   `json:"close,omitempty"`
}

// ProcStdinResult says how many bytes the process took within
// ProcStdinWait, and whether its stdin is now closed.
type ProcStdinResult struct {
	Written int  `json:"written"`
	Closed  bool `json:"closed"`
}

// ProcSignal sends Signal to a process (its process group; SIGKILL: its
// whole tree, by its cgroup) and waits up to Wait for it to exit.
type ProcSignal struct {
	ID     string   `json:"id"`
	Signal int      `json:"signal"`
	Wait   Duration `json:"wait,omitempty"`
}
