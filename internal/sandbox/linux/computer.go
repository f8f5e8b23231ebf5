package linux

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cubicle-sandbox/cubicle/internal/agent"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/linux/disk"
)

// computer is one running sandbox.
type computer struct {
	id     string
	spec   sandbox.Spec
	driver *Driver
	dir    computerDir
	rec    record
	lock   *os.File
	uid    hostID // the host uid user code runs as
	cg     *userCgroup
	proc   *agentProc
	client *agent.Client
	stderr boundedBuffer
	pids   *os.File     // the computer's /proc, to see its tasks stop (see Kill)
	net    sandbox.Link // an internet computer's interface (Config.Network)
	// rootRelease lets go of the template image the computer's root is
	// (rootImages), nil for the host's runtime.
	rootRelease func()
	// upper is a build computer's root's upper layer (buildroot.go).
	upper *os.File

	done chan struct{} // closed when the agent process has ended (agentProc.done)

	teardownMu sync.Mutex
	killed     bool // Kill returned: no task of the computer runs code
	tornDown   bool
	keptPath   string
	resumed    bool // its disk is a paused computer's (Driver.Resume)
}

var _ sandbox.Sandbox = (*computer)(nil)

func (c *computer) ID() string         { return c.id }
func (c *computer) Spec() sandbox.Spec { return c.spec }

// CutNetwork takes an internet computer's interface away (its Link ends:
// every connection closes, the TUN device goes); nothing for others.
func (c *computer) CutNetwork() error {
	if c.net == nil {
		return nil
	}
	return c.net.Close()
}

// Done is closed when the agent process has been reaped (by the launcher;
// or it exited after the launcher died).
func (c *computer) Done() <-chan struct{} { return c.done }

// ExitReason describes the agent's end from its wait status, once Done is
// closed.
func (c *computer) ExitReason() string {
	select {
	case <-c.done:
		return c.proc.exitReason()
	default:
		return ""
	}
}

func (c *computer) Exec(ctx context.Context, req sandbox.ExecRequest, sio sandbox.ExecIO) (sandbox.ExitStatus, error) {
	return c.client.Exec(ctx, req, sio)
}

func (c *computer) StartProcess(ctx context.Context, req sandbox.ProcessStart) (sandbox.ProcessInfo, error) {
	return c.client.StartProcess(ctx, req)
}

func (c *computer) ListProcesses(ctx context.Context) ([]sandbox.ProcessInfo, error) {
	return c.client.ListProcesses(ctx)
}

func (c *computer) GetProcess(ctx context.Context, id string) (sandbox.ProcessInfo, error) {
	return c.client.GetProcess(ctx, id)
}

func (c *computer) ProcessOutput(ctx context.Context, req sandbox.OutputRequest, out sandbox.OutputIO) (sandbox.OutputEnd, error) {
	return c.client.ProcessOutput(ctx, req, out)
}

func (c *computer) WriteStdin(ctx context.Context, req sandbox.StdinWrite) (sandbox.StdinResult, error) {
	return c.client.WriteStdin(ctx, req)
}

func (c *computer) SignalProcess(ctx context.Context, id string, sig int, wait time.Duration) (sandbox.ProcessInfo, error) {
	return c.client.SignalProcess(ctx, id, sig, wait)
}

func (c *computer) WriteFile(ctx context.Context, req sandbox.FileWrite, r io.Reader) (sandbox.Written, error) {
	return c.client.WriteFile(ctx, req, r)
}

func (c *computer) ReadFile(ctx context.Context, req sandbox.FileRead, w io.Writer) (sandbox.DataEnd, error) {
	return c.client.ReadFile(ctx, req, w)
}

func (c *computer) Stat(ctx context.Context, path string) (sandbox.FileInfo, error) {
	return c.client.Stat(ctx, path)
}

func (c *computer) List(ctx context.Context, path string) (sandbox.Listing, error) {
	return c.client.List(ctx, path)
}

func (c *computer) Mkdir(ctx context.Context, path string, parents bool) error {
	return c.client.Mkdir(ctx, path, parents)
}

func (c *computer) Remove(ctx context.Context, path string, recursive bool) error {
	return c.client.Remove(ctx, path, recursive)
}

func (c *computer) Move(ctx context.Context, from, to string, overwrite bool) error {
	return c.client.Move(ctx, from, to, overwrite)
}

func (c *computer) WriteTar(ctx context.Context, req sandbox.TarWrite, r io.Reader) (sandbox.TarDone, error) {
	return c.client.WriteTar(ctx, req, r)
}

func (c *computer) ReadTar(ctx context.Context, req sandbox.TarRead, w io.Writer) (sandbox.TarDone, error) {
	return c.client.ReadTar(ctx, req, w)
}

func (c *computer) Python(ctx context.Context, req sandbox.PythonRequest, onOutput func(sandbox.PythonOutput)) (sandbox.PythonResult, error) {
	return c.client.Python(ctx, req, onOutput)
}

func (c *computer) PythonControl(ctx context.Context, action string) error {
	return c.client.PythonControl(ctx, action)
}

// OpenTerminal starts a process on a terminal of the computer's own
// (see agent.Terminal).
func (c *computer) OpenTerminal(ctx context.Context, req sandbox.TerminalRequest, out io.Writer) (sandbox.Terminal, error) {
	t, err := c.client.OpenTerminal(ctx, req, out)
	if err != nil {
		return nil, err
	}
	return t, nil
}

var _ sandbox.Kernel = (*agent.KernelRelay)(nil)

// OpenKernel starts the computer's relayed kernel (see agent.KernelRelay).
func (c *computer) OpenKernel(ctx context.Context, start sandbox.KernelStart) (sandbox.Kernel, error) {
	k, err := c.client.OpenKernel(ctx, start)
	if err != nil {
		return nil, err
	}
	return k, nil
}

// Kill SIGKILLs every process of the computer and returns once none of them
// can run code again: each has left its last system call and entered the
// kernel's exit, or is gone. The kernel finishing those exits (freeing
// memory, unmounting the workspace) and the removal of the computer's
// resources are left to Destroy, which must still be called. Idempotent.
func (c *computer) Kill(ctx context.Context) error {
	c.teardownMu.Lock()
	defer c.teardownMu.Unlock()
	if c.killed || c.tornDown {
		return nil
	}
	c.signal()
	if err := c.waitStopped(ctx); err != nil {
		return err
	}
	c.killed = true
	return nil
}

// Destroy kills everything and removes every resource of the computer. It
// is idempotent, and after a partial failure a later call retries what is
// left (every step is safe to repeat).
func (c *computer) Destroy(ctx context.Context) error {
	_, err := c.finish(ctx, endDestroy)
	return err
}

// Keep stops the computer but keeps its disk, mounted on the host.
func (c *computer) Keep(ctx context.Context) (string, error) {
	return c.finish(ctx, endKeep)
}

// Pause stops the computer but keeps its disk, unmounted, for Resume.
func (c *computer) Pause(ctx context.Context) error {
	_, err := c.finish(ctx, endPause)
	return err
}

// ending is what becomes of a computer's disk when it ends.
type ending int

const (
	endDestroy ending = iota // removed
	endKeep                  // mounted on the host for inspection (Keep)
	endPause                 // kept, unmounted, for Resume (Pause)
)

func (c *computer) finish(ctx context.Context, end ending) (string, error) {
	c.teardownMu.Lock()
	defer c.teardownMu.Unlock()
	if c.tornDown {
		return c.keptPath, nil
	}
	if err := c.teardown(ctx, end); err != nil {
		return "", err
	}
	c.tornDown = true
	return c.keptPath, nil
}

// teardown kills the agent (which takes the whole PID namespace with it),
// waits until every process is gone (the last one to exit unmounts the
// workspace, which detaches its loop device), then removes cgroups, the disk
// image and the directory. With endKeep, the disk is mounted at
// <dir>/workspace instead; with endPause, it is moved to the paused
// directory.
func (c *computer) teardown(ctx context.Context, end ending) error {
	var errs []error
	c.signal()
	if c.proc != nil {
		if err := c.waitReaped(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if c.client != nil {
		c.client.Close()
	}
	if c.cg != nil {
		if err := c.cg.destroy(); err != nil {
			errs = append(errs, fmt.Errorf("remove cgroup: %w", err))
		}
	}
	keep := end == endKeep
	if keep {
		path, err := c.keepDisk(ctx)
		if err != nil {
			errs = append(errs, err)
		}
		c.keptPath = path
	} else {
		saved := true // a disk to pause is never removed before it is saved
		if end == endPause {
			if err := c.driver.savePaused(ctx, c.id, c.dir.path(imageFile)); err != nil {
				errs, saved = append(errs, err), false
			}
		}
		if saved {
			if err := c.removeDir(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	// Only now: no process of the computer runs, and a computer left for GC
	// or kept keeps its uid until its directory is gone.
	c.uid.release(!keep && len(errs) == 0)
	if c.rootRelease != nil {
		c.rootRelease()
	}
	if c.upper != nil {
		c.upper.Close()
		c.upper = nil
	}
	if c.pids != nil {
		c.pids.Close()
		c.pids = nil
	}
	if c.lock != nil {
		c.lock.Close()
	}
	if len(errs) > 0 {
		c.driver.log.Warn("computer teardown incomplete; cubicle gc will retry", "computer", c.id, "errors", errs)
		return fmt.Errorf("destroy %s: %v", c.id, errs)
	}
	return nil
}

func (c *computer) removeDir() error {
	os.Remove(c.dir.path(rootDir))
	c.driver.templates.Discard(c.dir.path(imageFile))
	os.Remove(c.dir.path(recordFile))
	os.Remove(c.dir.path(lockFile))
	if err := os.Remove(string(c.dir)); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("remove %s: %w", c.dir, err)
	}
	return nil
}

// keepDisk mounts the stopped computer's disk on the host for inspection.
func (c *computer) keepDisk(ctx context.Context) (string, error) {
	c.rec.Kept = true
	c.rec.AgentPid = 0
	c.rec.Cgroups = nil
	if err := c.dir.write(c.rec); err != nil {
		return "", err
	}
	target := c.dir.path(keptDir)
	if err := os.Mkdir(target, 0o755); err != nil {
		return "", err
	}
	loop, err := disk.Attach(ctx, c.dir.path(imageFile), false)
	if err != nil {
		return "", err
	}
	defer loop.Close()
	flags, data := disk.MountFlags()
	if err := unix.Mount(loop.Path, target, "ext4", flags, data); err != nil {
		return "", fmt.Errorf("mount kept workspace: %w", err)
	}
	return target, nil
}
