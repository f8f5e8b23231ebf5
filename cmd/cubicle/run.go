package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/cubicle-sandbox/cubicle/internal/cliflag"
	"github.com/cubicle-sandbox/cubicle/internal/config"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/linux"
)

const runUsage = `Usage: cubicle run [flags] -- CMD [ARG...]

Runs one command in a fresh computer and removes the computer afterwards.
Output is streamed; the exit status is the command's (a signal N gives
128+N, running out of memory 137, a timeout 124, a failure of cubicle 125).

Example:
  cubicle run --memory 256M --timeout 10s -- /usr/bin/python3 -c 'print(6*7)'

Flags:
`

func runCmd(args []string) int {
	fs := newFlags("run", runUsage)
	memory := &cliflag.Size{Bytes: sandbox.DefaultMemory}
	disk := &cliflag.Size{Bytes: sandbox.DefaultDisk}
	timeout := &cliflag.Duration{D: sandbox.DefaultTimeout}
	var env cliflag.List
	fs.Var(memory, "memory", "memory limit")
	fs.Var(disk, "disk", "disk size for /workspace")
	fs.Var(timeout, "timeout", "wall-time limit (0: none)")
	fs.Var(&env, "env", "environment variable NAME=value (repeatable)")
	pids := fs.Int64("pids", sandbox.DefaultPids, "maximum number of processes and threads")
	cpus := fs.Float64("cpus", sandbox.DefaultCPUs, "CPU limit in cores (0: no hard limit)")
	keep := fs.Bool("keep", false, "keep the workspace and print its path instead of deleting it")
	data := fs.String("data", defaultData, "state directory for computers' disks and records")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	argv := fs.Args()
	if len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "cubicle run: no command given (usage: cubicle run [flags] -- CMD [ARG...])")
		return 2
	}
	spec := sandbox.DefaultSpec()
	spec.MemoryBytes, spec.DiskBytes, spec.Timeout = memory.Bytes, disk.Bytes, timeout.D
	spec.Pids, spec.CPUs, spec.Env = *pids, *cpus, env
	if err := spec.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "cubicle run: %s\n", flagError(err))
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	drv, err := linux.New(linux.Config{StateDir: *data})
	if err != nil {
		fmt.Fprintf(os.Stderr, "cubicle run: %v\n", err)
		return 125
	}
	drv.GC(ctx) // computers of killed earlier runs
	sb, err := drv.Create(ctx, spec)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cubicle run: %v\n", err)
		return 125
	}
	st, execErr := sb.Exec(ctx, sandbox.ExecRequest{Argv: argv}, sandbox.ExecIO{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
	finish("run", sb, *keep)
	return exitCode(spec, st, execErr)
}

// finish destroys a command's computer, or keeps its workspace.
func finish(command string, sb sandbox.Sandbox, keep bool) {
	ctx := context.Background()
	if !keep {
		if err := sb.Destroy(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "cubicle %s: %v\n", command, err)
		}
		return
	}
	path, err := sb.Keep(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cubicle %s: keep workspace: %v\n", command, err)
		return
	}
	fmt.Fprintf(os.Stderr, "cubicle: workspace kept at %s (remove with 'cubicle gc --kept')\n", path)
}

// exitCode maps a process's end to the CLI's exit status, explaining the
// cases a plain code would hide.
func exitCode(spec sandbox.Spec, st sandbox.ExitStatus, err error) int {
	switch {
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(os.Stderr, "cubicle: interrupted; the computer was destroyed")
		return 130
	case errors.Is(err, sandbox.ErrNotFound):
		fmt.Fprintf(os.Stderr, "cubicle: %v\n", err)
		return 127
	case errors.Is(err, sandbox.ErrPermission):
		fmt.Fprintf(os.Stderr, "cubicle: %v\n", err)
		return 126
	case err != nil:
		fmt.Fprintf(os.Stderr, "cubicle: %v\n", err)
		return 125
	case st.TimedOut:
		fmt.Fprintf(os.Stderr, "cubicle: %s; the command and its descendants were killed\n", sandbox.ExecTimedOut(int(spec.Timeout.Seconds())))
		return 124
	case st.OOMKilled:
		fmt.Fprintf(os.Stderr, "cubicle: out of memory: the computer's memory limit (%s) was reached and the process was killed\n", config.Size(spec.MemoryBytes))
		return 137
	case st.Signal > 0:
		return 128 + st.Signal
	}
	return st.ExitCode
}

// flagError rewrites a spec validation error to name the CLI flag.
func flagError(err error) string {
	return "--" + trimSentinel(err.Error(), sandbox.ErrInvalidSpec.Error()+": ")
}

func trimSentinel(s, prefix string) string {
	if len(s) >= len(prefix) && s[:len(prefix)] == prefix {
		return s[len(prefix):]
	}
	return s
}
