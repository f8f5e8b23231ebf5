package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// proc runs host commands the way every peer is measured: stdin /dev/null,
// stdout a pipe read directly, stderr a file (an *os.File is handed to the
// child as is: no copying goroutine that a lingering process could hold
// open) kept for error messages.
type proc struct {
	stderr  *os.File
	timeout time.Duration
}

// newProc makes a proc whose stderr file lives in dir (default
// os.TempDir()). With unlink, the file is removed at once and lives on
// only as the open descriptor, so there is nothing to clean up.
func newProc(dir, name string, timeout time.Duration, unlink bool) (*proc, error) {
	if dir == "" {
		dir = os.TempDir()
	}
	// O_APPEND: after Truncate(0) a child's writes land at the start again.
	path := filepath.Join(dir, fmt.Sprintf("cubicle-bench-%s-%d.stderr", name, os.Getpid()))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	if unlink {
		os.Remove(path)
	}
	return &proc{stderr: f, timeout: timeout}, nil
}

func (p *proc) close() error { return p.stderr.Close() }

func (p *proc) command(ctx context.Context, argv []string) *exec.Cmd {
	p.stderr.Truncate(0)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stderr = p.stderr
	cmd.WaitDelay = time.Second
	return cmd
}

// fail describes a failed command with what it printed on stderr.
func (p *proc) fail(argv []string, err error) error {
	b := make([]byte, 1024)
	n, _ := p.stderr.ReadAt(b, 0)
	msg := strings.Join(strings.Fields(string(b[:n])), " ")
	if msg != "" {
		return fmt.Errorf("%s: %w: %s", filepath.Base(argv[0]), err, msg)
	}
	return fmt.Errorf("%s: %w", filepath.Base(argv[0]), err)
}

// firstByte starts argv and returns the time from fork until the first
// byte arrived on its stdout. It then waits for the command, checks that it
// printed want and exited 0.
func (p *proc) firstByte(ctx context.Context, argv []string, want string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	r, w, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	defer r.Close()
	cmd := p.command(ctx, argv)
	cmd.Stdout = w
	start := time.Now()
	err = cmd.Start()
	w.Close()
	if err != nil {
		return 0, p.fail(argv, err)
	}
	// The pipe is in Go's poller: a deadline unblocks the read when ctx
	// ends even if a stray process keeps the write end open.
	stop := context.AfterFunc(ctx, func() { r.SetReadDeadline(time.Now()) })
	defer stop()
	buf := make([]byte, 256)
	n, rerr := r.Read(buf)
	first := time.Now()
	if n > 0 && rerr == nil {
		m, _ := io.ReadFull(r, buf[n:]) // the rest, until EOF
		n += m
	}
	if werr := cmd.Wait(); werr != nil {
		return 0, p.fail(argv, werr)
	}
	if n == 0 {
		return 0, p.fail(argv, fmt.Errorf("no output: %v", rerr))
	}
	if got := string(buf[:n]); got != want {
		return 0, p.fail(argv, fmt.Errorf("output %q, want %q", got, want))
	}
	return first.Sub(start), nil
}

// roundTrip runs argv to completion and returns the time from fork until
// it was reaped.
func (p *proc) roundTrip(ctx context.Context, argv []string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	cmd := p.command(ctx, argv)
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, p.fail(argv, err)
	}
	return time.Since(start), nil
}

// run runs argv to completion for set-up and clean-up steps.
func (p *proc) run(ctx context.Context, argv ...string) error {
	_, err := p.roundTrip(ctx, argv)
	return err
}

// hostForkExec is the floor: /bin/echo's first byte and a /bin/true round
// trip started directly by this process, no isolation at all; and the
// same round trip after idleGap of quiet, the floor of the cubicle idle
// row (a quiet host's CPUs take longer to wake: what of the idle row is
// the host's, not the computer's).
func hostForkExec(cfg Config) (*path, *path) {
	var pr *proc
	p := &path{
		name: "host fork+exec", required: true,
		rows: []rowDef{
			{RowHost, "host     fork+exec /bin/echo → first byte"},
			{RowHostTrue, "host     fork+exec /bin/true round trip"},
		},
	}
	p.setup = func(context.Context) error {
		var err error
		pr, err = newProc(cfg.TempDir, "host", cfg.Timeout, true)
		return err
	}
	p.sample = func(ctx context.Context) (map[string]time.Duration, error) {
		d, err := pr.firstByte(ctx, echoArgv, echoOutput)
		if err != nil {
			return nil, err
		}
		rt, err := pr.roundTrip(ctx, trueArgv)
		return map[string]time.Duration{RowHost: d, RowHostTrue: rt}, err
	}
	p.close = func(context.Context) error {
		if pr == nil {
			return nil
		}
		return pr.close()
	}
	idle := &path{
		name: "host fork+exec after idle", required: true,
		rows: []rowDef{{RowHostIdle, fmt.Sprintf("host     fork+exec /bin/true after %v idle", idleGap)}},
		sample: func(ctx context.Context) (map[string]time.Duration, error) {
			if err := sleepCtx(ctx, idleGap); err != nil {
				return nil, err
			}
			if pr == nil {
				return nil, errors.New("the host path was not set up")
			}
			rt, err := pr.roundTrip(ctx, trueArgv)
			return map[string]time.Duration{RowHostIdle: rt}, err
		},
	}
	return p, idle
}

// installHint says how to get a missing peer.
var installHint = map[string]string{PeerBwrap: "apt-get install bubblewrap", PeerRunc: "apt-get install runc"}

func lookPeer(name string) (string, error) {
	bin, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%s is not installed, skipped (install it with: %s)", name, installHint[name])
	}
	return bin, nil
}

// topDir is a top-level runtime directory as it is on this host.
type topDir struct {
	name   string // "bin"
	target string // its symlink target (merged /usr, as on Debian 12), or "" for a real directory
}

// runtimeDirs lists the top-level runtime directories besides /usr.
func runtimeDirs() []topDir {
	var dirs []topDir
	for _, d := range []string{"bin", "lib", "lib64", "sbin"} {
		fi, err := os.Lstat("/" + d)
		if err != nil {
			continue
		}
		t := ""
		if fi.Mode()&os.ModeSymlink != 0 {
			if t, err = os.Readlink("/" + d); err != nil {
				continue
			}
		}
		dirs = append(dirs, topDir{d, t})
	}
	return dirs
}

// bwrapPath runs /bin/echo under bubblewrap with the isolation closest to a
// computer's that bwrap offers without cgroups: all namespaces (user too),
// read-only /usr, fresh /proc, minimal /dev, tmpfs /tmp and /workspace,
// uid/gid 1000, a new session, dying with its parent.
func bwrapPath(cfg Config) (*path, error) {
	bin, err := lookPeer("bwrap")
	if err != nil {
		return nil, err
	}
	argv := []string{bin, "--unshare-all", "--die-with-parent", "--new-session",
		"--ro-bind", "/usr", "/usr"}
	for _, d := range runtimeDirs() {
		if d.target != "" {
			argv = append(argv, "--symlink", d.target, "/"+d.name)
		} else {
			argv = append(argv, "--ro-bind", "/"+d.name, "/"+d.name)
		}
	}
	argv = append(argv, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/workspace",
		"--chdir", "/workspace", "--uid", "1000", "--gid", "1000", "--hostname", "computer")
	argv = append(argv, echoArgv...)

	var pr *proc
	p := &path{
		name: "bwrap",
		rows: []rowDef{{RowBwrap, "bwrap    start → first byte"}},
	}
	p.setup = func(context.Context) error {
		pr, err = newProc(cfg.TempDir, "bwrap", cfg.Timeout, true)
		return err
	}
	p.sample = func(ctx context.Context) (map[string]time.Duration, error) {
		d, err := pr.firstByte(ctx, argv, echoOutput)
		return map[string]time.Duration{RowBwrap: d}, err
	}
	p.close = func(context.Context) error {
		if pr == nil {
			return nil
		}
		return pr.close()
	}
	return p, nil
}
