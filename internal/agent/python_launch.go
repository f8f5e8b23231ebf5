package agent

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
	"github.com/cubicle-sandbox/cubicle/internal/kernel"
)

// Launching a kernel: the connection file, the ipykernel process as the
// sandbox user, the client connection, and why a start failed.

var errPortTaken = errors.New("a kernel port was taken")

// kernelSpec says how to start a kernel: where, with what environment on
// top of the computer's, and how the agent's client talks to it.
type kernelSpec struct {
	cwd  string
	env  []string // after the computer's own (a relay client's variables)
	opts kernel.Options
	// warmUp: the first cell is an eager prelude; the kernel keeps its
	// cyclic garbage collector off until that cell ends
	// (python_launcher.py, --freeze-after-first-cell).
	warmUp bool
}

// sessionKernel is the spec of Python calls' kernels (session and per_call).
func sessionKernel(cwd string) kernelSpec {
	return kernelSpec{cwd: cwd, opts: kernel.Options{
		MaxFrameBytes:   kernelMaxFrame,
		MaxMessageBytes: kernelMaxFrame,
		MaxImageBytes:   kernelMaxImage,
		MaxOutputBytes:  defaultMaxOutput,
	}}
}

// startKernel starts a kernel as the sandbox user and connects to it. A
// port picked by NewConnInfo can be taken before the kernel binds it; that
// is retried once.
func (s *Server) startKernel(ctx context.Context, spec kernelSpec) (*pyKernel, error) {
	k, err := s.launchKernel(ctx, spec)
	if errors.Is(err, errPortTaken) {
		k, err = s.launchKernel(ctx, spec)
	}
	return k, err
}

func (s *Server) launchKernel(ctx context.Context, spec kernelSpec) (*pyKernel, error) {
	ci, err := kernel.NewConnInfo("127.0.0.1")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", protocol.ErrInternal, err)
	}
	dir, file, err := s.writeConnFile(ci)
	if err != nil {
		return nil, err
	}
	k, err := s.spawnKernel(spec, dir, file)
	if err != nil {
		s.removeConnDir(dir)
		return nil, err
	}
	if err := k.connect(ctx, ci, spec.opts); err != nil {
		return nil, k.startFailure(ctx, err)
	}
	return k, nil
}

// spawnKernel starts ipykernel as the sandbox user with the connection
// file, and the goroutines that drain its stderr and wait for its exit.
// The caller removes dir if it fails.
func (s *Server) spawnKernel(spec kernelSpec, dir, file string) (*pyKernel, error) {
	cwd := spec.cwd
	if s.init.Python == "" {
		return nil, fmt.Errorf("%w: this computer's template has no Python (python3 with ipykernel); create the computer from a template that has one", protocol.ErrInvalid)
	}
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: open %s: %v", protocol.ErrInternal, os.DevNull, err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		devnull.Close()
		return nil, fmt.Errorf("%w: pipe: %v", protocol.ErrInternal, err)
	}
	argv := []string{s.init.Python, filepath.Join(dir, kernelLauncher), "-f", file,
		"--InteractiveShell.colors=NoColor", "--HistoryManager.enabled=False"}
	if spec.warmUp {
		argv = append(argv, "--freeze-after-first-cell")
	}
	// The computer's own environment (Spec.Env), then the spec's, may
	// override these.
	env := dedupEnv(append([]string{
		"PYDEVD_DISABLE_FILE_VALIDATION=1",
		"MPLBACKEND=module://matplotlib_inline.backend_inline",
		"IPYTHONDIR=" + dir + "/ipython", // not in the user's /workspace
	}, s.env(spec.env, cwd)...))

	k := &pyKernel{
		s: s, proc: &process{}, dir: dir, cwd: cwd,
		oomBefore:  s.oomKills(),
		stderrDone: make(chan struct{}),
		exited:     make(chan struct{}),
		cleaned:    make(chan struct{}),
	}
	// Kernel stdout is only fd-level output ipykernel echoes; cells' output
	// arrives over iopub. stderr is drained into a small tail for messages.
	w, err := s.spawn(k.proc, argv, env, cwd, []*os.File{devnull, devnull, errW})
	devnull.Close()
	errW.Close()
	if err != nil {
		errR.Close()
		return nil, err
	}
	k.pid = k.proc.getPid()
	go k.drainStderr(errR)
	go k.monitor(w, errR)
	return k, nil
}

// connect connects the kernel client, giving up within kernelStartTimeout
// or as soon as the kernel exits.
func (k *pyKernel) connect(ctx context.Context, ci kernel.ConnInfo, opts kernel.Options) error {
	cctx, cancel := context.WithTimeout(ctx, kernelStartTimeout)
	defer cancel()
	go func() {
		select {
		case <-k.exited:
			cancel()
		case <-cctx.Done():
		}
	}()
	c, err := kernel.Connect(cctx, ci, opts)
	if err != nil {
		return err
	}
	k.mu.Lock()
	select {
	case <-k.exited:
		err = kernel.ErrDisconnected
	default:
		k.client = c
	}
	k.mu.Unlock()
	if err != nil {
		c.Close()
	}
	return err
}

// startFailure stops a kernel that did not connect (err says why) and
// explains it: the caller's cancellation, a port taken meanwhile, a kernel
// that did not answer or one that exited (with the last line of its stderr).
func (k *pyKernel) startFailure(ctx context.Context, err error) error {
	if !k.waitExit(200 * time.Millisecond) {
		k.stop(killStop)
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return &kernelStartError{msg: fmt.Sprintf("it did not answer (%v)", err)}
	}
	<-k.cleaned
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	tail := k.stderr.String()
	if strings.Contains(tail, "Address already in use") {
		return errPortTaken
	}
	return &kernelStartError{msg: "it exited while starting (" + k.death() + ")" + lastLine(tail), died: true}
}

// kernelStartError is a kernel that could not start for reasons of its own
// (not the agent's): reported in the call's result, not as an agent error.
// died: it exited by itself (a crash), rather than being stopped for not
// answering.
type kernelStartError struct {
	msg  string
	died bool
}

func (e *kernelStartError) Error() string { return e.msg }

// kernelLauncher is the name of the launcher (python_launcher.py) in a
// kernel's private directory.
const kernelLauncher = "launch.py"

//go:embed python_launcher.py
var kernelLauncherSource []byte

// writeConnFile creates a private directory under the computer's /tmp with
// the connection file and the launcher in it, as the sandbox user: the agent
// has no CAP_DAC_OVERRIDE or CAP_CHOWN, and the kernel (uid 1000) must read
// them.
func (s *Server) writeConnFile(ci kernel.ConnInfo) (dir, file string, err error) {
	err = s.ws.as(func() error {
		d, err := os.MkdirTemp("/tmp", "cubicle-kernel-") // mode 0700
		if err != nil {
			return err
		}
		f := filepath.Join(d, "kernel.json")
		err = ci.WriteConnectionFile(f)
		if err == nil {
			err = os.WriteFile(filepath.Join(d, kernelLauncher), kernelLauncherSource, 0o600)
		}
		if err != nil {
			os.RemoveAll(d)
			return err
		}
		dir, file = d, f
		return nil
	})
	if err != nil {
		if errors.Is(err, unix.ENOSPC) {
			return "", "", fmt.Errorf("%w: cannot write the kernel's connection file: /tmp is full", protocol.ErrNoSpace)
		}
		return "", "", fmt.Errorf("%w: write the kernel's connection file: %v", protocol.ErrInternal, err)
	}
	return dir, file, nil
}

// removeConnDir removes the kernel's private directory (its connection
// file and IPython's state), as the sandbox user, who owns it; RemoveAll
// never follows a symlink out of it.
func (s *Server) removeConnDir(dir string) {
	if dir == "" {
		return
	}
	s.ws.as(func() error { return os.RemoveAll(dir) })
}
