package sandbox

import (
	"context"
	"io"
)

// Terminals runs processes on a pseudo-terminal of the computer's own.
type Terminals interface {
	// OpenTerminal starts req on a new terminal and returns once it runs;
	// its output (one stream: the terminal's) goes to out, from one
	// goroutine. Cancelling ctx hangs the terminal up, as Hangup.
	OpenTerminal(ctx context.Context, req TerminalRequest, out io.Writer) (Terminal, error)
}

// TerminalRequest starts a process on a terminal of Cols×Rows characters
// (0: 80×24). Timeout 0 means none.
type TerminalRequest struct {
	ExecRequest
	Cols, Rows int
}

// Terminal is a running process on a terminal. Its processes end with it:
// what the main process leaves running when it exits is killed.
type Terminal interface {
	// Pid is the main process's pid inside the computer.
	Pid() int
	// Input sends raw input (keys, pasted text) to the terminal; it waits
	// while the computer has not consumed the earlier input.
	Input(ctx context.Context, b []byte) error
	// Resize sets the terminal's size (its processes get SIGWINCH).
	Resize(cols, rows int) error
	// Hangup hangs the terminal up: SIGHUP to its session, and what still
	// runs a few seconds later is killed.
	Hangup()
	// Wait returns how the main process ended, once it was reaped and
	// all of the output was written to out.
	Wait() (ExitStatus, error)
}

// MaxTerminals is how many terminals a computer runs at a time;
// MaxTerminalSize bounds their columns and rows.
const (
	MaxTerminals    = 8
	MaxTerminalSize = 1000
)
