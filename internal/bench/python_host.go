package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/kernel"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// HostKernelConfig says how to start the floor's kernel: an ipykernel on
// the host, started as the agent starts one, driven by Cubicle's own
// kernel client, with no computer, agent or HTTP in between.
type HostKernelConfig struct {
	Python string // default /usr/bin/python3
	// Dir holds the connection file and the kernel's IPython and Jupyter
	// directories; it must exist and is the caller's to remove.
	Dir string
	// Prelude runs once after the start, as in a pool computer's kernel.
	Prelude string
}

// hostKernel is a running floor kernel.
type hostKernel struct {
	cfg    HostKernelConfig
	cmd    *exec.Cmd
	done   chan struct{}
	client *kernel.Client
}

// hostKernelArgv is the agent's kernel command line (internal/agent).
func hostKernelArgv(python, connFile string) []string {
	return []string{python, "-m", "ipykernel_launcher", "-f", connFile,
		"--InteractiveShell.colors=NoColor", "--HistoryManager.enabled=False"}
}

func startHostKernel(ctx context.Context, cfg HostKernelConfig) (*hostKernel, error) {
	if cfg.Python == "" {
		cfg.Python = "/usr/bin/python3"
	}
	ci, err := kernel.NewConnInfo("127.0.0.1")
	if err != nil {
		return nil, err
	}
	file := filepath.Join(cfg.Dir, "kernel.json")
	if err := ci.WriteConnectionFile(file); err != nil {
		return nil, err
	}
	argv := hostKernelArgv(cfg.Python, file)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = cfg.Dir
	cmd.Env = append(jupyterEnv(os.Environ(), cfg.Dir), "MPLBACKEND=module://matplotlib_inline.backend_inline")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	k := &hostKernel{cfg: cfg, cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // Pdeathsig follows the forking thread
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		cmd.Wait()
		close(k.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	go func() {
		select {
		case <-k.done:
			cancel()
		case <-cctx.Done():
		}
	}()
	if k.client, err = kernel.Connect(cctx, ci, kernel.Options{}); err != nil {
		k.stop()
		return nil, fmt.Errorf("connect to the host kernel: %w", err)
	}
	if cfg.Prelude != "" {
		res, err := k.client.Execute(cctx, cfg.Prelude, nil)
		if err == nil && res.Failed() {
			err = errors.New("the prelude failed")
			if res.Error != nil {
				err = fmt.Errorf("the prelude failed: %s: %s", res.Error.EName, res.Error.EValue)
			}
		}
		if err != nil {
			k.stop()
			return nil, err
		}
	}
	return k, nil
}

// execute runs code and checks that its result is want.
func (k *hostKernel) execute(ctx context.Context, code, want string) (time.Duration, error) {
	start := time.Now()
	res, err := k.client.Execute(ctx, code, nil)
	d := time.Since(start)
	if err != nil {
		return 0, err
	}
	if res.Failed() || !res.Completed {
		return 0, fmt.Errorf("host kernel: status %q", res.Status)
	}
	for _, o := range res.Outputs {
		if o.Type == kernel.OutResult {
			if o.Text != want {
				return 0, fmt.Errorf("host kernel: result %q, want %q", o.Text, want)
			}
			return d, nil
		}
	}
	return 0, errors.New("host kernel: no execute_result")
}

// stop asks the kernel to exit, kills it when it does not within 5 s, and
// kills whatever else runs from its directory.
func (k *hostKernel) stop() error {
	if k.client != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		k.client.Shutdown(ctx)
		cancel()
		k.client.Close()
	}
	select {
	case <-k.done:
	case <-time.After(5 * time.Second):
		syscall.Kill(-k.cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-k.done:
		case <-time.After(30 * time.Second):
			return fmt.Errorf("host kernel (pid %d) did not exit after SIGKILL", k.cmd.Process.Pid)
		}
	}
	if n, err := killUnder(k.cfg.Dir); err != nil || n > 0 {
		return errors.Join(err, fmt.Errorf("%d processes of the host kernel were left and killed", n))
	}
	return nil
}

// hostRoundTrip times 1+1 in a host kernel through Cubicle's kernel
// client: the floor under the API row.
func hostRoundTrip(cfg PythonConfig) *path {
	var k *hostKernel
	return &path{
		name: "host ipykernel 1+1",
		rows: []rowDef{{RowHostKernelOnePlusOne, "host     1+1  ipykernel via Cubicle's client"}},
		setup: func(ctx context.Context) error {
			var err error
			k, err = startHostKernel(ctx, *cfg.HostKernel)
			return err
		},
		close: func(ctx context.Context) error {
			if k == nil {
				return nil
			}
			return k.stop()
		},
		sample: func(ctx context.Context) (map[string]time.Duration, error) {
			ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
			defer cancel()
			d, err := k.execute(ctx, onePlusOne, onePlusOneResult)
			if err != nil {
				return nil, err
			}
			return map[string]time.Duration{RowHostKernelOnePlusOne: d}, nil
		},
	}
}

// driverRoundTrip times 1+1 in a computer of the sandbox driver called in
// this process: the agent and the computer, without HTTP and the service.
// Its kernel ran the prelude at set-up, as a pool computer's did.
func driverRoundTrip(cfg PythonConfig) *path {
	var sb sandbox.Sandbox
	req := sandbox.PythonRequest{Cells: []sandbox.PythonCell{{Code: onePlusOne}}, Timeout: cfg.Timeout}
	return &path{
		name: "cubicle driver 1+1", required: true,
		rows: []rowDef{{RowDriverOnePlusOne, "driver   1+1  Sandbox.Python (in process)"}},
		setup: func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, cfg.FirstTimeout)
			defer cancel()
			var err error
			if sb, err = cfg.Driver.Create(ctx, cfg.Spec); err != nil {
				return err
			}
			res, err := sb.Python(ctx, sandbox.PythonRequest{Prelude: cfg.Prelude, Mode: "session", Timeout: cfg.FirstTimeout}, nil)
			if err == nil && res.Status != "ok" {
				err = fmt.Errorf("prelude: %s", res.Message)
			}
			return err
		},
		close: func(ctx context.Context) error {
			if sb == nil {
				return nil
			}
			return sb.Destroy(ctx)
		},
		sample: func(ctx context.Context) (map[string]time.Duration, error) {
			ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
			defer cancel()
			var result string
			start := time.Now()
			res, err := sb.Python(ctx, req, func(o sandbox.PythonOutput) {
				if o.Output.Type == kernel.OutResult {
					result = o.Output.Text
				}
			})
			d := time.Since(start)
			switch {
			case err != nil:
				return nil, err
			case res.Status != "ok":
				return nil, fmt.Errorf("python: status %q: %s", res.Status, res.Message)
			case result != onePlusOneResult:
				return nil, fmt.Errorf("python: result %q, want %q", result, onePlusOneResult)
			}
			return map[string]time.Duration{RowDriverOnePlusOne: d}, nil
		},
	}
}
