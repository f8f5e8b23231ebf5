package protocol

import "time"

// Terminals. A process on a pseudo-terminal is an exec (KindExec) whose
// ExecStart has Pty set: the agent allocates the terminal in the
// computer's own devpts, the process runs as the session leader with the
// terminal's slave as its stdin, stdout, stderr and controlling terminal,
// and without a default timeout. On its stream:
//
//   - the agent sends KindStarted, KindStdout (the terminal's output: one
//     stream, no stderr), KindStdinAck, and KindExit last, as for any
//     exec; when the main process exits, whatever it left running on the
//     terminal is killed;
//   - the host sends KindStdin (raw input, within the stdin window),
//     KindPtyResize (JSON PtySize), and KindSignal: SIGHUP hangs the
//     terminal up (SIGHUP and SIGCONT to its session and foreground
//     process group, then SIGKILL to the whole tree after
//     PtyHangupGrace), any other signal goes to the session's process
//     group.
//
// A computer runs at most MaxPtys terminals at a time (ErrTooManyProcs).
const (
	KindPtyResize Kind = 44 // JSON PtySize, on a terminal's exec stream
)

// Bounds of terminals.
const (
	MaxPtys = 8
	// MaxPtySize bounds rows and columns.
	MaxPtySize = 1000
	// PtyHangupGrace is how long a hung-up terminal's processes have to
	// exit before they are killed.
	PtyHangupGrace = 2 * time.Second
)

// PtySize is a terminal's size in characters; 0 means the default (80
// columns, 24 rows).
type PtySize struct {
	Cols int `json:"cols"`
	Rows int `json:"rows"`
}
