package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/cubicle-sandbox/cubicle/internal/bench"
	"github.com/cubicle-sandbox/cubicle/internal/cliflag"
	"github.com/cubicle-sandbox/cubicle/internal/config"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

const benchPythonUsage = `Usage: cubicle-bench python [flags]

Measures Python in computers over real HTTP, in one run and side by side,
and prints p50, p90, p99, mean and n in milliseconds:
  cubicle  1+1 round trip: POST /v1/computers/{id}/python into one
           computer with a warm session kernel, until the answer is
           decoded (unary JSON, and SSE until the result event)
  driver   1+1 in a computer of the sandbox driver called in this
           process: the computer and its agent, without HTTP
  host     1+1 in an ipykernel on the host, started as the agent starts
           one and driven by Cubicle's kernel client: the floor, without
           computer, agent or HTTP
  kgw      1+1 through the warm server's Jupyter Kernel Gateway API: one
           kernel (POST /api/kernels, a computer of its own), one channels
           WebSocket, timed as jupyter's below with the same client
  jupyter  1+1 through Debian's jupyter_server: one kernel, one channels
           WebSocket; execute_request until its execute_reply and the
           iopub status idle arrived (the same /usr/bin/python3 kernel);
           twice: with the client of the other rows, which waits out
           jupyter_server's delayed-ACK stall (~40 ms) as a browser does,
           and with one that sets TCP_QUICKACK before each read
  warm     a brand-new computer and its first cell (a pandas
           DataFrame's describe()): POST /v1/computers from a full warm
           pool, whose kernels already imported numpy, pandas and
           matplotlib, plus POST …/python; the pool refills between runs
           and, in another pool computer, its kernel's CPU time before any
           cell (its start and the whole prelude: a refill's kernel)
  cold     the same on a server without a pool: a cold start, and the
           first cell starts the kernel and runs the prelude (lazily: it
           imports what the cell names); then the kernel's CPU time; and
           the same with 1+1 as the first cell (it names no prelude
           import: the kernel's start alone; its target is 500 ms p50)
It starts two 'cubicle serve' (one with a warm pool of --pool, one with
none) on 127.0.0.1, jupyter_server (python3-jupyter-server; skipped with
a note when missing) and the host kernel, each with a temporary
directory, and stops them afterwards. Every computer, kernel, server and
directory is removed,
also on error or Ctrl-C. Exits 0 when every Cubicle run succeeded, 1 when
one failed, 130 when interrupted. Needs root.

Example:
  cubicle-bench python --n 100 --first-n 30 --json

Flags:
`

func benchPython(args []string) int {
	fs := cliflag.NewFlags("cubicle-bench", "python", benchPythonUsage)
	n := fs.Int("n", bench.DefaultPythonN, "timed 1+1 round trips per path")
	firstN := fs.Int("first-n", bench.DefaultPythonFirstN, "timed first cells per path (warm, cold), spread among the round trips (0: none)")
	warmup := fs.Int("warmup", 3, "untimed round trips per path before (first cells: 1)")
	pool := fs.Int("pool", bench.DefaultPythonPoolSize, "warm pool size of the warm server (at least 2)")
	cold := fs.Bool("cold", true, "also start a server without a pool and measure cold first cells")
	jupyter := fs.Bool("jupyter", true, "also measure jupyter_server (python3-jupyter-server)")
	kgw := fs.Bool("kgw", true, "also measure the Jupyter Kernel Gateway API (/api/kernels WebSocket)")
	host := fs.Bool("host", true, "also measure the floor: a kernel on the host, without computer, agent or HTTP")
	withSandbox := fs.Bool("sandbox", true, "also measure 1+1 through the sandbox driver in this process, without HTTP")
	python := fs.String("python", "/usr/bin/python3", "the Python that runs jupyter_server and the host kernel")
	c := commonFlags(fs, os.TempDir(), "directory for the bench's temporary state (a fresh directory inside it, removed afterwards)", "bound on one 1+1 round trip (first cells and pool refills: 3m)")
	if code, ok := cliflag.Parse(fs, args); !ok {
		return code
	}
	fail := benchUsageError("python")
	cfg := bench.PythonConfig{N: *n, FirstN: *firstN, Warmup: *warmup, Timeout: c.timeout.D, KGW: *kgw, Log: os.Stderr}
	if code, bad := checkBenchArgs(fs, fail, cfg.Validate(), c.timeout.D, &c.cubicle); bad {
		return code
	}
	switch {
	case *pool < 2 || *pool > 16:
		return fail("--pool must be between 2 and 16, got %d", *pool)
	}

	ctx, stop := benchContext()
	defer stop()
	rep, err := runBenchPython(ctx, cfg, c.place, *pool, *cold, *jupyter, *host, *withSandbox, *python)
	return benchOutcome{
		name: "python", made: "computer, kernel, server and directory", err: err,
		ctx:           ctx,
		cleanupFailed: rep != nil && rep.CleanupFailed,
		failed:        rep != nil && rep.Failed, failedWhat: "some runs failed",
		asJSON: c.asJSON, report: rep, table: func(w io.Writer) error { return bench.WritePythonTable(w, rep) },
	}.finish()
}

// runBenchPython makes a temporary directory in p.data, starts the warm
// server, the cold one (withCold) and lets the bench start jupyter_server
// (withJupyter), runs the bench, and removes everything it made: the
// servers are stopped (they destroy their computers), what a kill left is
// collected, and the directory is removed.
func runBenchPython(ctx context.Context, cfg bench.PythonConfig, p place, poolSize int,
	withCold, withJupyter, withHost, withSandbox bool, python string) (rep *bench.PythonReport, err error) {
	root, jdir, hdir, err := bench.PythonTempDirs(p.data)
	if err != nil {
		return nil, err
	}
	s := &benchScratch{root: root, cubicle: p.cubicle}
	defer func() { closeInto(s, rep) }()
	if withSandbox {
		if cfg.Driver, err = s.sandbox(); err != nil {
			return nil, err
		}
		cfg.Spec, cfg.Prelude = sandbox.DefaultSpec(), config.DefaultPrelude
	}
	// start starts one of the two servers; they differ only in their pool.
	start := func(name string, pool int) (*bench.Server, bench.ServerInfo, error) {
		scfg := bench.ServerConfig{PoolSize: pool, MaxConcurrent: 16, MemoryBudget: "16G"}
		return s.startServer(ctx, name, name, fmt.Sprintf("%s: pool %d, default prelude", name, pool), scfg)
	}
	warm, info, err := start("warm", poolSize)
	if err != nil {
		return nil, err
	}
	cfg.Warm = bench.PythonServer{URL: warm.URL, Key: warm.Key, PoolSize: poolSize, Info: info}
	if withCold && cfg.FirstN > 0 {
		cold, info, err := start("cold", 0)
		if err != nil {
			return nil, err
		}
		cfg.Cold = bench.PythonServer{URL: cold.URL, Key: cold.Key, Info: info}
	}
	if withJupyter {
		cfg.Jupyter = &bench.JupyterConfig{Python: python, Dir: jdir}
	}
	if withHost {
		// The servers run the default prelude (their CUBICLE_ variables are
		// the bench's); so does the floor's kernel.
		cfg.HostKernel = &bench.HostKernelConfig{Python: python, Dir: hdir, Prelude: config.DefaultPrelude}
	}
	return bench.RunPython(ctx, cfg)
}
