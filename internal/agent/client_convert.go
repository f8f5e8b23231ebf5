package agent

import (
	"errors"

	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// The client speaks the protocol on the channel and internal/sandbox's
// types to its callers; every conversion between the two is here.

// Both ends bound a relayed message by the same size.
var _ [protocol.MaxKernelMessage - sandbox.MaxKernelMessage]struct{}
var _ [sandbox.MaxKernelMessage - protocol.MaxKernelMessage]struct{}

// And a stdin write, and a process's output ring, by the same size.
var _ [protocol.ProcRing - sandbox.ProcessOutputRing]struct{}
var _ [sandbox.ProcessOutputRing - protocol.ProcRing]struct{}
var _ [protocol.MaxProcStdin - sandbox.MaxStdinWrite]struct{}
var _ [sandbox.MaxStdinWrite - protocol.MaxProcStdin]struct{}

func wireExec(r sandbox.ExecRequest, stdin bool) protocol.ExecStart {
	return protocol.ExecStart{Argv: r.Argv, Command: r.Command, Env: r.Env, Cwd: r.Cwd, Stdin: stdin,
		Timeout: protocol.Millis(r.Timeout)}
}

func exitStatus(s protocol.ExitStatus) sandbox.ExitStatus {
	return sandbox.ExitStatus{ExitCode: s.ExitCode, Signal: s.Signal, TimedOut: s.TimedOut,
		OOMKilled: s.OOMKilled, Duration: s.Duration.D()}
}

func wireProcStart(r sandbox.ProcessStart) protocol.ProcStart {
	return protocol.ProcStart{Argv: r.Argv, Command: r.Command, Env: r.Env, Cwd: r.Cwd,
		Timeout: protocol.Millis(r.Timeout), Stdin: r.Stdin, CloseStdin: r.CloseStdin}
}

func processInfo(p protocol.ProcInfo) sandbox.ProcessInfo {
	out := sandbox.ProcessInfo{ID: p.ID, Pid: p.Pid, Argv: p.Argv, Command: p.Command, Cwd: p.Cwd,
		Running: p.Running, StartedAt: p.StartedAt, EndedAt: p.EndedAt, StdinOpen: p.StdinOpen,
		OutputStart: p.OutputStart, OutputEnd: p.OutputEnd}
	if p.Exit != nil {
		out.Exit = exitStatus(*p.Exit)
	}
	return out
}

func listing(l protocol.Listing) sandbox.Listing {
	out := sandbox.Listing{Entries: make([]sandbox.FileInfo, len(l.Entries)), Truncated: l.Truncated}
	for i, fi := range l.Entries {
		out.Entries[i] = sandbox.FileInfo(fi)
	}
	return out
}

func wirePython(r sandbox.PythonRequest) protocol.PythonRequest {
	w := protocol.PythonRequest{Cells: make([]protocol.PythonCell, len(r.Cells)), Timeout: protocol.Millis(r.Timeout),
		Cwd: r.Cwd, Reset: r.Reset, Mode: r.Mode, Prelude: r.Prelude, MaxOutput: r.MaxOutput}
	for i, c := range r.Cells {
		w.Cells[i] = protocol.PythonCell(c)
	}
	return w
}

func pythonOutput(o protocol.PythonOutput) sandbox.PythonOutput {
	return sandbox.PythonOutput{Cell: o.Cell, Output: KernelOutput(o.Output)}
}

func pythonResult(r protocol.PythonResult) sandbox.PythonResult {
	out := sandbox.PythonResult{Status: r.Status, Cells: make([]sandbox.CellResult, len(r.Cells)),
		FailedCell: r.FailedCell, Cancelled: r.Cancelled, TimedOut: r.TimedOut, Message: r.Message,
		KernelRestarted: r.KernelRestarted}
	for i, c := range r.Cells {
		out.Cells[i] = sandbox.CellResult(c)
	}
	return out
}

// errorKinds are the sandbox's kinds of the protocol's error codes (the
// other, internal, has no kind of its own).
var errorKinds = []struct{ wire, kind error }{
	{protocol.ErrNotFound, sandbox.ErrNotFound}, {protocol.ErrExists, sandbox.ErrExists},
	{protocol.ErrNotDir, sandbox.ErrNotDir}, {protocol.ErrIsDir, sandbox.ErrIsDir},
	{protocol.ErrNotEmpty, sandbox.ErrNotEmpty}, {protocol.ErrPathEscape, sandbox.ErrPathEscape},
	{protocol.ErrNotRegular, sandbox.ErrNotRegular}, {protocol.ErrPermission, sandbox.ErrPermission},
	{protocol.ErrTooLarge, sandbox.ErrTooLarge}, {protocol.ErrNoSpace, sandbox.ErrNoSpace},
	{protocol.ErrInvalid, sandbox.ErrInvalid}, {protocol.ErrProcLimit, sandbox.ErrProcLimit},
	{protocol.ErrLocked, sandbox.ErrLocked}, {protocol.ErrChanging, sandbox.ErrChanging},
	{protocol.ErrKernelDead, sandbox.ErrKernelDead}, {protocol.ErrKernelBacklog, sandbox.ErrKernelBacklog},
	{protocol.ErrBusy, sandbox.ErrKernelBusy},
	{protocol.ErrUnknownProc, sandbox.ErrNoProcess}, {protocol.ErrTooManyProcs, sandbox.ErrTooManyProcesses},
	{protocol.ErrStdinClosed, sandbox.ErrStdinClosed},
}

// fromWire is the agent's error as the sandbox's kind, with the agent's
// message.
func fromWire(w protocol.WireError) error { return hostError(protocol.FromWire(w)) }

// hostError is err, of a protocol kind, as the sandbox's kind too.
func hostError(err error) error {
	for _, k := range errorKinds {
		if errors.Is(err, k.wire) {
			return &kindError{kind: k.kind, err: err}
		}
	}
	return err
}

// kindError is err (its message, its chain) as one of the sandbox's kinds.
type kindError struct{ kind, err error }

func (e *kindError) Error() string   { return e.err.Error() }
func (e *kindError) Unwrap() []error { return []error{e.kind, e.err} }
