package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cubicle-sandbox/cubicle/internal/client"
	"github.com/cubicle-sandbox/cubicle/internal/cliflag"
	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/config"
	"github.com/cubicle-sandbox/cubicle/internal/httpapi"
	"github.com/cubicle-sandbox/cubicle/internal/pyterm"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/linux"
)

const pythonUsage = `Usage: cubicle python [flags] [-c CODE | FILE]

Runs Python in a real Jupyter kernel. Without --computer it creates a fresh
local computer (like 'cubicle run') and destroys it at the end; with
--computer ID it uses that computer of a 'cubicle serve' server (its URL from
--url or CUBICLE_URL, the API key from CUBICLE_KEY, never from a flag).

What runs:
  -c CODE      one cell
  FILE         each '# %%' section is a cell, titled by the text after '# %%'
               ('# %% [markdown]' sections are skipped); FILE '-' is stdin
  (nothing)    a terminal on stdin starts an interactive REPL: state persists
               between inputs, a line ending in ':' or inside open brackets or
               quotes continues ('... ') until an empty line, Ctrl-C interrupts
               the running cell (twice: cancels it) or discards the input,
               Ctrl-D exits. Stdin that is not a terminal is read as one cell.
Cells run in order in one kernel; the first failing cell stops the rest.

Output: printed as it happens. Standard output gets the cells' stdout,
results and displays; standard error gets their stderr, tracebacks and the
one-line summary of a failed or timed-out call. Images are shown inline in
kitty, Ghostty, iTerm2 and WezTerm when stdout is that terminal, otherwise
saved as cubicle-out-<n>.png (in the current directory or --save-dir) with a
note "[image saved to <path> (<w>x<h>)]". --json prints instead the whole
result as JSON, the same as POST /v1/computers/{id}/python answers.

Exit status: 0 all cells ran, 1 a cell failed, 124 timeout ("Command timed
out after <n> seconds"), 125 a failure of cubicle or of the server, 2 bad
usage, 128+N after signal N (130: Ctrl-C; 141: the reader of stdout left).
The REPL exits 0 on Ctrl-D whatever its inputs did.

Example:
  cubicle python -c 'import sys; print(sys.version)'
  cubicle python --timeout 60 analysis.py
  CUBICLE_KEY=cub_... cubicle python --computer cmp_123 --url http://10.0.0.5:8080 -c 'df.describe()'

Flags:
`

const defaultCubicleURL = "http://127.0.0.1:8080"

// pythonArgs is the parsed command line.
type pythonArgs struct {
	opts      pyterm.Options
	set       map[string]bool // flags given
	code      string          // -c
	rest      []string        // FILE
	computer  string          // --computer
	serverURL string
	spec      sandbox.Spec // of a local computer
	prelude   string
	keep      bool
	data      string
}

// pythonUsageError reports a bad command line in one line: exit status 2.
func pythonUsageError(format string, a ...any) int {
	fmt.Fprintf(os.Stderr, "cubicle python: "+format+" (see 'cubicle python --help')\n", a...)
	return 2
}

// parsePythonArgs reads the flags; it returns an exit code when the
// command must stop.
func parsePythonArgs(args []string) (*pythonArgs, int, bool) {
	fs := newFlags("python", pythonUsage)
	code := fs.String("c", "", "run `CODE` as one cell")
	computerID := fs.String("computer", "", "use this computer of a server instead of a fresh local one")
	serverURL := fs.String("url", envOr("CUBICLE_URL", defaultCubicleURL), "server URL for --computer (env CUBICLE_URL)")
	timeout := &cliflag.Duration{D: 30 * time.Second}
	fs.Var(timeout, "timeout", "time limit of each call (all cells of -c/FILE, or one REPL input), 1s to 10m")
	jsonOut := fs.Bool("json", false, "print the result as JSON instead of the outputs")
	saveDir := fs.String("save-dir", ".", "directory for images the terminal cannot show")
	reset := fs.Bool("reset", false, "restart the computer's kernel before the first cell (state is lost)")
	noPrelude := fs.Bool("no-prelude", false, "local computer: skip the prelude (numpy as np, pandas as pd, matplotlib.pyplot as plt)")
	memory := &cliflag.Size{Bytes: sandbox.DefaultMemory}
	disk := &cliflag.Size{Bytes: sandbox.DefaultDisk}
	var env cliflag.List
	fs.Var(memory, "memory", "local computer: memory limit")
	fs.Var(disk, "disk", "local computer: disk size for /workspace")
	fs.Var(&env, "env", "local computer: environment variable NAME=value (repeatable)")
	cpus := fs.Float64("cpus", sandbox.DefaultCPUs, "local computer: CPU limit in cores (0: no hard limit)")
	keep := fs.Bool("keep", false, "local computer: keep the workspace and print its path instead of deleting it")
	data := fs.String("data", defaultData, "local computer: state directory for computers' disks and records")
	if code, ok := parse(fs, args); !ok {
		return nil, code, false
	}
	a := &pythonArgs{set: map[string]bool{}, code: *code, rest: fs.Args(), computer: *computerID, serverURL: *serverURL,
		spec: sandbox.DefaultSpec(), prelude: config.DefaultPrelude, keep: *keep, data: *data,
		opts: pyterm.Options{Timeout: (timeout.D + time.Second - 1) / time.Second * time.Second, JSON: *jsonOut, Reset: *reset,
			SaveDir: *saveDir, Body: httpapi.PythonBody}}
	fs.Visit(func(f *flag.Flag) { a.set[f.Name] = true })
	switch {
	case len(a.rest) > 1:
		return nil, pythonUsageError("give at most one FILE, got %d arguments", len(a.rest)), false
	case len(a.rest) == 1 && a.set["c"]:
		return nil, pythonUsageError("give -c CODE or FILE, not both"), false
	case timeout.D < time.Second || timeout.D > sandbox.MaxPythonTimeout:
		return nil, pythonUsageError("--timeout must be between 1s and %ds, got %s", int(sandbox.MaxPythonTimeout/time.Second), timeout.D), false
	case a.computer == "" && a.set["url"]:
		return nil, pythonUsageError("--url needs --computer"), false
	}
	if a.computer != "" {
		for _, name := range []string{"memory", "disk", "env", "cpus", "keep", "data", "no-prelude"} {
			if a.set[name] {
				return nil, pythonUsageError("--%s applies to a local computer, not to --computer", name), false
			}
		}
		return a, 0, true
	}
	a.spec.MemoryBytes, a.spec.DiskBytes, a.spec.CPUs, a.spec.Env = memory.Bytes, disk.Bytes, *cpus, env
	if err := a.spec.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "cubicle python: %s\n", flagError(err))
		return nil, 2, false
	}
	if *noPrelude {
		a.prelude = ""
	}
	return a, 0, true
}

func pythonCmd(args []string) int {
	a, code, ok := parsePythonArgs(args)
	if !ok {
		return code
	}
	// Check the target before reading any input.
	var remote *pyterm.Remote
	if a.computer != "" {
		key := os.Getenv("CUBICLE_KEY")
		if key == "" {
			fmt.Fprintln(os.Stderr, "cubicle python: --computer needs an API key in the environment variable CUBICLE_KEY (it is never taken from a flag, which other users can see in ps)")
			return 2
		}
		c, err := client.New(client.Config{URL: a.serverURL, Key: key})
		if err != nil {
			return pythonUsageError("--url %v", err)
		}
		remote = pyterm.NewRemote(c, a.computer)
	}
	cells, repl, code, ok := pythonInput(a)
	if !ok {
		return code
	}

	// Signals are caught for the whole command, so that the local computer
	// is always destroyed: a signal cancels what is running (in the REPL,
	// Ctrl-C interrupts the cell instead). SIGPIPE too: 'cubicle python |
	// head' must not die on a write and leave the computer running.
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
	defer signal.Stop(sigc)

	// Where to run it.
	var b pyterm.Backend = remote
	if remote == nil {
		sb, status := newLocalComputer(sigc, a.spec, a.data)
		if sb == nil {
			return status
		}
		defer finish("python", sb, a.keep)
		b = pyterm.NewLocal(sb, a.prelude, int64(config.Default().Computers.MaxOutputBytes))
	}
	out := pyterm.NewRenderer(os.Stdout, os.Stderr, isTerminal(os.Stdout), a.opts)
	if repl {
		return pyterm.RunREPL(b, a.opts, out, sigc)
	}
	return pyterm.RunCells(b, cells, a.opts, out, sigc)
}

// newLocalComputer is a fresh computer of this host (computers of killed
// earlier runs are collected first); nil and the exit status when it
// cannot start.
func newLocalComputer(sigc <-chan os.Signal, spec sandbox.Spec, data string) (sandbox.Sandbox, int) {
	ctx, stop := pyterm.UntilSignal(sigc)
	defer stop()
	drv, err := linux.New(linux.Config{StateDir: data})
	if err != nil {
		fmt.Fprintf(os.Stderr, "cubicle python: %v\n", err)
		return nil, 125
	}
	drv.GC(ctx) // computers of killed earlier runs
	sb, err := drv.Create(ctx, spec)
	if err != nil {
		if sig := pyterm.CaughtSignal(ctx); sig != nil {
			fmt.Fprintln(os.Stderr, "cubicle python: interrupted")
			return nil, pyterm.SignalStatus(sig)
		}
		fmt.Fprintf(os.Stderr, "cubicle python: %v\n", err)
		return nil, 125
	}
	return sb, 0
}

// pythonInput is what to run: -c, FILE, piped stdin, or a REPL (repl).
func pythonInput(a *pythonArgs) (cells []computer.PythonCell, repl bool, code int, ok bool) {
	var src []byte
	var err error
	switch {
	case a.set["c"]:
		return []computer.PythonCell{{Code: a.code}}, false, 0, true
	case len(a.rest) == 1:
		if a.rest[0] == "-" {
			src, err = io.ReadAll(os.Stdin)
		} else {
			src, err = os.ReadFile(a.rest[0])
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "cubicle python: %v\n", err)
			return nil, false, 2, false
		}
		if cells = pyterm.SplitCells(string(src)); len(cells) == 0 {
			return nil, false, pythonUsageError("%s has no code", a.rest[0]), false
		}
		return cells, false, 0, true
	case isTerminal(os.Stdin):
		return nil, true, 0, true
	}
	if src, err = io.ReadAll(os.Stdin); err != nil {
		fmt.Fprintf(os.Stderr, "cubicle python: read stdin: %v\n", err)
		return nil, false, 2, false
	}
	return []computer.PythonCell{{Code: string(src)}}, false, 0, true
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
