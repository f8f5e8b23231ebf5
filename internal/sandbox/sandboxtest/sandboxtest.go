package sandboxtest

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// Sandbox is a scriptable computer. Each ...Func field, when set, answers
// its method; an unscripted call fails with ErrNotScripted (ID, Spec, Done,
// ExitReason, Kill and Destroy have working defaults). Set the fields
// before the sandbox is shared.
type Sandbox struct {
	IDValue   string
	SpecValue sandbox.Spec

	ExecFunc          func(ctx context.Context, req sandbox.ExecRequest, sio sandbox.ExecIO) (sandbox.ExitStatus, error)
	WriteFileFunc     func(ctx context.Context, req sandbox.FileWrite, r io.Reader) (sandbox.Written, error)
	ReadFileFunc      func(ctx context.Context, req sandbox.FileRead, w io.Writer) (sandbox.DataEnd, error)
	StatFunc          func(ctx context.Context, path string) (sandbox.FileInfo, error)
	ListFunc          func(ctx context.Context, path string) (sandbox.Listing, error)
	MkdirFunc         func(ctx context.Context, path string, parents bool) error
	RemoveFunc        func(ctx context.Context, path string, recursive bool) error
	MoveFunc          func(ctx context.Context, from, to string, overwrite bool) error
	WriteTarFunc      func(ctx context.Context, req sandbox.TarWrite, r io.Reader) (sandbox.TarDone, error)
	ReadTarFunc       func(ctx context.Context, req sandbox.TarRead, w io.Writer) (sandbox.TarDone, error)
	PythonFunc        func(ctx context.Context, req sandbox.PythonRequest, onOutput func(sandbox.PythonOutput)) (sandbox.PythonResult, error)
	PythonControlFunc func(ctx context.Context, action string) error
	OpenKernelFunc    func(ctx context.Context, start sandbox.KernelStart) (sandbox.Kernel, error)
	OpenTerminalFunc  func(ctx context.Context, req sandbox.TerminalRequest, out io.Writer) (sandbox.Terminal, error)
	KeepFunc          func(ctx context.Context) (string, error)
	StartProcessFunc  func(ctx context.Context, req sandbox.ProcessStart) (sandbox.ProcessInfo, error)
	ListProcessesFunc func(ctx context.Context) ([]sandbox.ProcessInfo, error)
	GetProcessFunc    func(ctx context.Context, id string) (sandbox.ProcessInfo, error)
	ProcessOutputFunc func(ctx context.Context, req sandbox.OutputRequest, out sandbox.OutputIO) (sandbox.OutputEnd, error)
	WriteStdinFunc    func(ctx context.Context, req sandbox.StdinWrite) (sandbox.StdinResult, error)
	SignalProcessFunc func(ctx context.Context, id string, sig int, wait time.Duration) (sandbox.ProcessInfo, error)
	// KillFunc and DestroyFunc run before the default, which ends the
	// computer (Done closes with ExitReason "killed"); an error they
	// return is the call's and leaves the computer running.
	KillFunc    func(ctx context.Context) error
	DestroyFunc func(ctx context.Context) error

	Kills, Destroys atomic.Int32 // calls so far

	once   sync.Once
	done   chan struct{}
	mu     sync.Mutex
	reason string
}

// ErrNotScripted is the error of a method the test did not script.
var ErrNotScripted = fmt.Errorf("sandboxtest: method not scripted")

func notScripted(name string) error { return fmt.Errorf("%w: %s", ErrNotScripted, name) }

// ID is IDValue.
func (s *Sandbox) ID() string { return s.IDValue }

// Spec is SpecValue.
func (s *Sandbox) Spec() sandbox.Spec { return s.SpecValue }

func (s *Sandbox) doneChan() chan struct{} {
	s.once.Do(func() { s.done = make(chan struct{}) })
	return s.done
}

// Done is closed once the computer ended (End, Kill or Destroy).
func (s *Sandbox) Done() <-chan struct{} { return s.doneChan() }

// ExitReason is the reason End was given, once Done is closed.
func (s *Sandbox) ExitReason() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reason
}

// End makes the computer's agent exit with reason (a crash, when called by
// the test); later calls do nothing.
func (s *Sandbox) End(reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.doneChan()
	select {
	case <-ch:
	default:
		s.reason = reason
		close(ch)
	}
}

// Ended reports whether Done is closed.
func (s *Sandbox) Ended() bool {
	select {
	case <-s.doneChan():
		return true
	default:
		return false
	}
}

func (s *Sandbox) Exec(ctx context.Context, req sandbox.ExecRequest, sio sandbox.ExecIO) (sandbox.ExitStatus, error) {
	if s.ExecFunc == nil {
		return sandbox.ExitStatus{}, notScripted("Exec")
	}
	return s.ExecFunc(ctx, req, sio)
}

func (s *Sandbox) StartProcess(ctx context.Context, req sandbox.ProcessStart) (sandbox.ProcessInfo, error) {
	if s.StartProcessFunc == nil {
		return sandbox.ProcessInfo{}, notScripted("StartProcess")
	}
	return s.StartProcessFunc(ctx, req)
}

func (s *Sandbox) ListProcesses(ctx context.Context) ([]sandbox.ProcessInfo, error) {
	if s.ListProcessesFunc == nil {
		return nil, notScripted("ListProcesses")
	}
	return s.ListProcessesFunc(ctx)
}

func (s *Sandbox) GetProcess(ctx context.Context, id string) (sandbox.ProcessInfo, error) {
	if s.GetProcessFunc == nil {
		return sandbox.ProcessInfo{}, notScripted("GetProcess")
	}
	return s.GetProcessFunc(ctx, id)
}

func (s *Sandbox) ProcessOutput(ctx context.Context, req sandbox.OutputRequest, out sandbox.OutputIO) (sandbox.OutputEnd, error) {
	if s.ProcessOutputFunc == nil {
		return sandbox.OutputEnd{}, notScripted("ProcessOutput")
	}
	return s.ProcessOutputFunc(ctx, req, out)
}

func (s *Sandbox) WriteStdin(ctx context.Context, req sandbox.StdinWrite) (sandbox.StdinResult, error) {
	if s.WriteStdinFunc == nil {
		return sandbox.StdinResult{}, notScripted("WriteStdin")
	}
	return s.WriteStdinFunc(ctx, req)
}

func (s *Sandbox) SignalProcess(ctx context.Context, id string, sig int, wait time.Duration) (sandbox.ProcessInfo, error) {
	if s.SignalProcessFunc == nil {
		return sandbox.ProcessInfo{}, notScripted("SignalProcess")
	}
	return s.SignalProcessFunc(ctx, id, sig, wait)
}

func (s *Sandbox) WriteFile(ctx context.Context, req sandbox.FileWrite, r io.Reader) (sandbox.Written, error) {
	if s.WriteFileFunc == nil {
		return sandbox.Written{}, notScripted("WriteFile")
	}
	return s.WriteFileFunc(ctx, req, r)
}

func (s *Sandbox) ReadFile(ctx context.Context, req sandbox.FileRead, w io.Writer) (sandbox.DataEnd, error) {
	if s.ReadFileFunc == nil {
		return sandbox.DataEnd{}, notScripted("ReadFile")
	}
	return s.ReadFileFunc(ctx, req, w)
}

func (s *Sandbox) Stat(ctx context.Context, path string) (sandbox.FileInfo, error) {
	if s.StatFunc == nil {
		return sandbox.FileInfo{}, notScripted("Stat")
	}
	return s.StatFunc(ctx, path)
}

func (s *Sandbox) List(ctx context.Context, path string) (sandbox.Listing, error) {
	if s.ListFunc == nil {
		return sandbox.Listing{}, notScripted("List")
	}
	return s.ListFunc(ctx, path)
}

func (s *Sandbox) Mkdir(ctx context.Context, path string, parents bool) error {
	if s.MkdirFunc == nil {
		return notScripted("Mkdir")
	}
	return s.MkdirFunc(ctx, path, parents)
}

func (s *Sandbox) Remove(ctx context.Context, path string, recursive bool) error {
	if s.RemoveFunc == nil {
		return notScripted("Remove")
	}
	return s.RemoveFunc(ctx, path, recursive)
}

func (s *Sandbox) Move(ctx context.Context, from, to string, overwrite bool) error {
	if s.MoveFunc == nil {
		return notScripted("Move")
	}
	return s.MoveFunc(ctx, from, to, overwrite)
}

func (s *Sandbox) WriteTar(ctx context.Context, req sandbox.TarWrite, r io.Reader) (sandbox.TarDone, error) {
	if s.WriteTarFunc == nil {
		return sandbox.TarDone{}, notScripted("WriteTar")
	}
	return s.WriteTarFunc(ctx, req, r)
}

func (s *Sandbox) ReadTar(ctx context.Context, req sandbox.TarRead, w io.Writer) (sandbox.TarDone, error) {
	if s.ReadTarFunc == nil {
		return sandbox.TarDone{}, notScripted("ReadTar")
	}
	return s.ReadTarFunc(ctx, req, w)
}

func (s *Sandbox) Python(ctx context.Context, req sandbox.PythonRequest, onOutput func(sandbox.PythonOutput)) (sandbox.PythonResult, error) {
	if s.PythonFunc == nil {
		return sandbox.PythonResult{}, notScripted("Python")
	}
	return s.PythonFunc(ctx, req, onOutput)
}

func (s *Sandbox) PythonControl(ctx context.Context, action string) error {
	if s.PythonControlFunc == nil {
		return notScripted("PythonControl")
	}
	return s.PythonControlFunc(ctx, action)
}

func (s *Sandbox) OpenTerminal(ctx context.Context, req sandbox.TerminalRequest, out io.Writer) (sandbox.Terminal, error) {
	if s.OpenTerminalFunc == nil {
		return nil, notScripted("OpenTerminal")
	}
	return s.OpenTerminalFunc(ctx, req, out)
}

func (s *Sandbox) OpenKernel(ctx context.Context, start sandbox.KernelStart) (sandbox.Kernel, error) {
	if s.OpenKernelFunc == nil {
		return nil, notScripted("OpenKernel")
	}
	return s.OpenKernelFunc(ctx, start)
}

func (s *Sandbox) Keep(ctx context.Context) (string, error) {
	if s.KeepFunc == nil {
		return "", notScripted("Keep")
	}
	return s.KeepFunc(ctx)
}

func (s *Sandbox) Kill(ctx context.Context) error {
	s.Kills.Add(1)
	if s.KillFunc != nil {
		if err := s.KillFunc(ctx); err != nil {
			return err
		}
	}
	s.End("killed")
	return nil
}

func (s *Sandbox) Destroy(ctx context.Context) error {
	s.Destroys.Add(1)
	if s.DestroyFunc != nil {
		if err := s.DestroyFunc(ctx); err != nil {
			return err
		}
	}
	s.End("killed")
	return nil
}

// Driver creates Sandboxes: New (when set) scripts each one; otherwise a
// computer with no scripted method. IDs are cmp_test<n>, zero-padded to a
// real id's length.
type Driver struct {
	New func(ctx context.Context, spec sandbox.Spec) (*Sandbox, error)
	// GCFunc answers GC (default: nothing to collect).
	GCFunc func(ctx context.Context) (sandbox.GCReport, error)

	mu  sync.Mutex
	all []*Sandbox
}

func (d *Driver) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sb := &Sandbox{}
	if d.New != nil {
		var err error
		if sb, err = d.New(ctx, spec); err != nil {
			return nil, err
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if sb.IDValue == "" {
		sb.IDValue = fmt.Sprintf("cmp_test%018d", len(d.all)+1)
	}
	sb.SpecValue = spec
	d.all = append(d.all, sb)
	return sb, nil
}

func (d *Driver) GC(ctx context.Context) (sandbox.GCReport, error) {
	if d.GCFunc != nil {
		return d.GCFunc(ctx)
	}
	return sandbox.GCReport{}, nil
}

// Sandboxes are the computers created so far, in order.
func (d *Driver) Sandboxes() []*Sandbox {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]*Sandbox(nil), d.all...)
}

// Last is the computer created last (nil before the first).
func (d *Driver) Last() *Sandbox {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.all) == 0 {
		return nil
	}
	return d.all[len(d.all)-1]
}

// Live counts the computers not destroyed yet.
func (d *Driver) Live() int {
	n := 0
	for _, sb := range d.Sandboxes() {
		if sb.Destroys.Load() == 0 {
			n++
		}
	}
	return n
}
