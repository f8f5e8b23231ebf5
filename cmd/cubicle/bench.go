package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/bench"
	"github.com/cubicle-sandbox/cubicle/internal/config"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/linux"
)

const benchTopUsage = `Usage: cubicle bench <benchmark> [flags]

Benchmarks:
  sandbox  computer start and exec latency, side by side with bwrap and runc
  api      the computers API over HTTP (create, exec, delete, load), side by
           side with the same operations on the sandbox driver
  python   Python over HTTP: 1+1 round trip side by side with jupyter_server,
           and the first cell of a new computer with the warm pool vs. cold
  gateway  the Responses gateway with a zero-latency upstream: overhead per
           tool round, and concurrent streamed responses

Examples:
  cubicle bench sandbox --n 100 --data /tmp/cubicle-bench
  cubicle bench api --n 200 --concurrency 50 --execs 100
  cubicle bench python --n 100
  cubicle bench gateway --n 50 --concurrency 20

Run 'cubicle bench <benchmark> --help' for its flags.
`

const benchUsage = `Usage: cubicle bench sandbox [flags]

Measures in one run, side by side, how fast a computer starts and runs a
process, and prints p50, p90, p99, mean and n of each in milliseconds:
  cubicle  cold start: Create() until /bin/echo's first byte of output
           (also Create() alone, and Destroy() as its own row)
  cubicle  exec in a running computer: /bin/true round trip, /bin/echo
           first byte
  host     /bin/echo started directly, the floor
  bwrap    /bin/echo with comparable isolation, fork to first byte
  runc     'runc run' of /bin/echo, and 'runc exec' into a running
           container (/bin/true round trip, /bin/echo first byte)
Runs are interleaved round-robin after untimed warm-up runs. A peer that
is not installed is skipped with a note. Every computer, container and
temporary directory is removed afterwards, also on Ctrl-C. Exits 0 when
every cubicle run succeeded, 1 when one failed, 130 when interrupted.

Example:
  cubicle bench sandbox --n 100 --data /tmp/cubicle-bench --peers bwrap,runc --json

Flags:
`

func benchCmd(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "cubicle bench: name what to measure (usage: cubicle bench sandbox|api|python|gateway [flags])")
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Print(benchTopUsage)
		return 0
	case "sandbox":
		return benchSandbox(args[1:])
	case "api":
		return benchAPI(args[1:])
	case "python":
		return benchPython(args[1:])
	case "gateway":
		return benchGateway(args[1:])
	}
	fmt.Fprintf(os.Stderr, "cubicle bench: unknown benchmark %q (known: sandbox, api, python, gateway; see 'cubicle bench --help')\n", args[0])
	return 2
}

func benchSandbox(args []string) int {
	fs := newFlags("bench sandbox", benchUsage)
	n := fs.Int("n", 50, "timed runs per path")
	warmup := fs.Int("warmup", 3, "untimed warm-up runs per path")
	data := fs.String("data", defaultData, "state directory for computers' disks and records")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	peers := fs.String("peers", strings.Join(bench.Peers, ","), "peers to compare with, comma-separated ('none' for none)")
	timeout := &durationFlag{bench.DefaultTimeout}
	fs.Var(timeout, "timeout", "bound on one run of a path")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	fail := benchUsageError("sandbox")
	switch {
	case fs.NArg() > 0:
		return fail("unexpected argument %q", fs.Arg(0))
	case *n < 1 || *n > 100000:
		return fail("--n must be between 1 and 100000, got %d", *n)
	case *warmup < 0 || *warmup > 1000:
		return fail("--warmup must be between 0 and 1000, got %d", *warmup)
	case timeout.d <= 0:
		return fail("--timeout must be positive")
	}
	var peerList []string
	if *peers != "none" {
		for _, p := range strings.Split(*peers, ",") {
			p = strings.TrimSpace(p)
			if p == "" {
				continue
			}
			if !slices.Contains(bench.Peers, p) {
				return fail("--peers: unknown peer %q (known: %s)", p, strings.Join(bench.Peers, ", "))
			}
			peerList = append(peerList, p)
		}
	}

	ctx, stop := benchContext()
	defer stop()
	drv, err := linux.New(linux.Config{StateDir: *data})
	if err != nil {
		fmt.Fprintf(os.Stderr, "cubicle bench sandbox: %v\n", err)
		return 1
	}
	drv.GC(ctx) // computers of killed earlier runs
	rep, err := bench.Run(ctx, bench.Config{
		Driver: drv, Spec: sandbox.DefaultSpec(), N: *n, Warmup: *warmup,
		Peers: peerList, Timeout: timeout.d, Log: os.Stderr,
	})
	return benchOutcome{
		name: "sandbox", made: "computer and container", err: err,
		interrupted:   errors.Is(err, context.Canceled),
		cleanupFailed: rep != nil && rep.CleanupFailed,
		failed:        rep != nil && rep.Failed, failedWhat: "some cubicle runs failed",
		asJSON: *asJSON, report: rep, table: func(w io.Writer) error { return bench.WriteTable(w, rep) },
	}.finish()
}

const benchAPIUsage = `Usage: cubicle bench api [flags]

Measures the computers API over real HTTP (one keep-alive client), side by
side in one run with the same operations on the sandbox driver called in
this process, and prints p50, p90, p99, mean and n in milliseconds:
  api      POST /v1/computers from a full warm pool (it waits for the
           pool to refill between creates), DELETE, exec /bin/true
           (unary JSON), /bin/echo's first byte streamed as SSE
  cubicle  cold start, Create(), Destroy(), exec round trip and first
           byte, as in 'cubicle bench sandbox'
  load     --concurrency computers created at once, then --execs execs
           of /bin/true in each (in sequence), all computers in
           parallel: throughput, latency, errors (429s counted apart)
Without --url it starts 'cubicle serve' itself on 127.0.0.1 with a free
port, a temporary data directory and a generated admin key, and stops it
afterwards. With --url and --key it measures that server (the in-process
rows then describe this host, not necessarily the server's). Every
computer and temporary directory is removed afterwards, also on Ctrl-C.
Exits 0 when every run and request succeeded, 1 when one failed, 130
when interrupted. Needs root (computers need namespaces and cgroups).

Examples:
  cubicle bench api --n 200 --concurrency 50 --execs 100 --json
  cubicle bench api --url http://127.0.0.1:8080 --key "$KEY" --sandbox=false

Flags:
`

func benchAPI(args []string) int {
	fs := newFlags("bench api", benchAPIUsage)
	url := fs.String("url", "", "measure the server at this address instead of starting one (needs --key)")
	key := fs.String("key", "", "API key for --url (its org must allow computers)")
	n := fs.Int("n", bench.DefaultAPIN, "timed runs per latency path")
	warmup := fs.Int("warmup", 3, "untimed warm-up runs per path")
	concurrency := fs.Int("concurrency", bench.DefaultAPIConcurrency, "computers in the load phase, created at once (0: no load phase)")
	execs := fs.Int("execs", bench.DefaultAPIExecs, "execs of /bin/true per computer in the load phase")
	pool := fs.Int("pool", bench.DefaultAPIPoolSize, "warm pool size of the server it starts (with --url: read off /metrics)")
	withSandbox := fs.Bool("sandbox", true, "also measure the sandbox driver in this process, for comparison")
	data := fs.String("data", os.TempDir(), "directory for the bench's temporary state (a fresh directory inside it, removed afterwards)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	timeout := &durationFlag{bench.DefaultTimeout}
	fs.Var(timeout, "timeout", "bound on one request or run")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	fail := benchUsageError("api")
	cfg := bench.APIConfig{URL: *url, Key: *key, N: *n, Warmup: *warmup, Concurrency: *concurrency, Execs: *execs,
		PoolSize: *pool, Timeout: timeout.d, Spec: sandbox.DefaultSpec(), Log: os.Stderr}
	if *url != "" {
		cfg.PoolSize = -1
	}
	if code, bad := checkBenchArgs(fs, fail, cfg.Validate(), timeout.d); bad {
		return code
	}
	switch {
	case *url == "" && (*pool < 1 || *pool > 1000):
		return fail("--pool must be between 1 and 1000, got %d", *pool)
	}

	ctx, stop := benchContext()
	defer stop()
	rep, err := runBenchAPI(ctx, cfg, *data, *withSandbox)
	return benchOutcome{
		name: "api", made: "computer, server and directory", err: err,
		interrupted:   errors.Is(err, context.Canceled) && ctx.Err() != nil,
		cleanupFailed: rep != nil && rep.CleanupFailed,
		failed:        rep != nil && rep.Failed, failedWhat: "some runs or requests failed",
		asJSON: *asJSON, report: rep, table: func(w io.Writer) error { return bench.WriteAPITable(w, rep) },
	}.finish()
}

// runBenchAPI makes a temporary directory in parent, starts a server in it
// unless cfg names one, runs the bench, and removes everything it made:
// the server is stopped (it destroys its computers), what a kill left is
// collected, and the directory is removed. Clean-up problems become notes
// of the report (or go to stderr when there is none).
func runBenchAPI(ctx context.Context, cfg bench.APIConfig, parent string, withSandbox bool) (rep *bench.APIReport, err error) {
	root, err := os.MkdirTemp(parent, "cubicle-bench-api-")
	if err != nil {
		return nil, fmt.Errorf("temporary directory: %w", err)
	}
	s := &benchScratch{root: root}
	defer func() { closeInto(s, rep) }()
	if withSandbox {
		if cfg.Driver, err = s.sandbox(); err != nil {
			return nil, err
		}
	}
	if cfg.URL == "" {
		// Limits, not usage: room for the load's computers, the pool and
		// the bench's own.
		maxConc := cfg.Concurrency + cfg.PoolSize + 8
		budget := max(64, (maxConc+1)/2+1) // GiB, at 512M per computer
		scfg := bench.ServerConfig{PoolSize: cfg.PoolSize, MaxConcurrent: maxConc, MemoryBudget: fmt.Sprintf("%dG", budget)}
		desc := fmt.Sprintf("pool %d, max_concurrent %d, memory_budget %s", scfg.PoolSize, scfg.MaxConcurrent, scfg.MemoryBudget)
		srv, info, err := s.startServer(ctx, "serve", "", desc, scfg)
		if err != nil {
			return nil, err
		}
		cfg.URL, cfg.Key, cfg.ServerPID, cfg.Server = srv.URL, srv.Key, srv.PID(), info
	}
	return bench.RunAPI(ctx, cfg)
}

const benchPythonUsage = `Usage: cubicle bench python [flags]

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
           iopub status idle arrived (the same /usr/bin/python3 kernel)
  warm     a brand-new computer and its first cell (a pandas
           DataFrame's describe()): POST /v1/computers from a full warm
           pool, whose kernels already imported numpy, pandas and
           matplotlib, plus POST …/python; the pool refills between runs
  cold     the same on a server without a pool: a cold start, and the
           first cell starts the kernel and runs the prelude
It starts two 'cubicle serve' (one with a warm pool of --pool, one with
none) on 127.0.0.1, jupyter_server (python3-jupyter-server; skipped with
a note when missing) and the host kernel, each with a temporary
directory, and stops them afterwards. Every computer, kernel, server and
directory is removed,
also on error or Ctrl-C. Exits 0 when every Cubicle run succeeded, 1 when
one failed, 130 when interrupted. Needs root.

Example:
  cubicle bench python --n 100 --first-n 30 --json

Flags:
`

func benchPython(args []string) int {
	fs := newFlags("bench python", benchPythonUsage)
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
	data := fs.String("data", os.TempDir(), "directory for the bench's temporary state (a fresh directory inside it, removed afterwards)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	timeout := &durationFlag{bench.DefaultTimeout}
	fs.Var(timeout, "timeout", "bound on one 1+1 round trip (first cells and pool refills: 3m)")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	fail := benchUsageError("python")
	cfg := bench.PythonConfig{N: *n, FirstN: *firstN, Warmup: *warmup, Timeout: timeout.d, KGW: *kgw, Log: os.Stderr}
	if code, bad := checkBenchArgs(fs, fail, cfg.Validate(), timeout.d); bad {
		return code
	}
	switch {
	case *pool < 2 || *pool > 16:
		return fail("--pool must be between 2 and 16, got %d", *pool)
	}

	ctx, stop := benchContext()
	defer stop()
	rep, err := runBenchPython(ctx, cfg, *data, *pool, *cold, *jupyter, *host, *withSandbox, *python)
	return benchOutcome{
		name: "python", made: "computer, kernel, server and directory", err: err,
		interrupted:   errors.Is(err, context.Canceled) && ctx.Err() != nil,
		cleanupFailed: rep != nil && rep.CleanupFailed,
		failed:        rep != nil && rep.Failed, failedWhat: "some runs failed",
		asJSON: *asJSON, report: rep, table: func(w io.Writer) error { return bench.WritePythonTable(w, rep) },
	}.finish()
}

// runBenchPython makes a temporary directory in parent, starts the warm
// server, the cold one (withCold) and lets the bench start jupyter_server
// (withJupyter), runs the bench, and removes everything it made: the
// servers are stopped (they destroy their computers), what a kill left is
// collected, and the directory is removed.
func runBenchPython(ctx context.Context, cfg bench.PythonConfig, parent string, poolSize int,
	withCold, withJupyter, withHost, withSandbox bool, python string) (rep *bench.PythonReport, err error) {
	root, jdir, hdir, err := bench.PythonTempDirs(parent)
	if err != nil {
		return nil, err
	}
	s := &benchScratch{root: root}
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

// benchContext is cancelled by Ctrl-C, SIGTERM and SIGHUP, so that every
// bench removes what it made before it exits.
func benchContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
}

// benchUsageError returns what reports a bad flag of 'cubicle bench name'
// and gives the usage exit code.
func benchUsageError(name string) func(format string, args ...any) int {
	return func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "cubicle bench "+name+": "+format+"\n", args...)
		return 2
	}
}

// benchOutcome is how a bench ended; finish reports it the same way for
// every bench.
type benchOutcome struct {
	name          string // as in 'cubicle bench <name>'
	made          string // what it makes and removes, for the clean-up line
	err           error
	interrupted   bool // err is the signal's cancellation
	cleanupFailed bool
	failed        bool   // some runs failed; the report's notes say which
	failedWhat    string // says so in the bench's words
	asJSON        bool
	report        any // printed as JSON
	table         func(io.Writer) error
}

// finish prints an error with what became of the clean-up, or the report,
// and returns the exit code: 130 interrupted, 1 failed, 0 otherwise.
func (o benchOutcome) finish() int {
	prefix := "cubicle bench " + o.name + ":"
	cleaned := "every " + o.made + " it made was removed"
	if o.cleanupFailed {
		cleaned = "clean-up was incomplete (see the notes above)"
	}
	switch {
	case o.interrupted:
		fmt.Fprintf(os.Stderr, "%s interrupted; %s\n", prefix, cleaned)
		return 130
	case o.err != nil:
		fmt.Fprintf(os.Stderr, "%s %v; %s\n", prefix, o.err, cleaned)
		return 1
	}
	if o.asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		enc.Encode(o.report)
	} else {
		o.table(os.Stdout)
	}
	if o.failed {
		fmt.Fprintf(os.Stderr, "%s %s (see the notes)\n", prefix, o.failedWhat)
		return 1
	}
	return 0
}

// benchScratch is the temporary state of 'bench api' and 'bench python': a
// directory under which its servers and in-process computers keep their
// state, the steps that stop them, and the notes their clean-up left.
type benchScratch struct {
	root          string
	undo          []func() // run last first by close
	notes         []string
	cleanupFailed bool
}

// note records a clean-up note (failed: something could not be removed)
// and shows it at once, since the report that will carry it comes last.
func (s *benchScratch) note(failed bool, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	fmt.Fprintln(os.Stderr, "note: "+msg)
	s.notes = append(s.notes, msg)
	s.cleanupFailed = s.cleanupFailed || failed
}

// gc removes what computers under dir left, after their owner is gone;
// wantNone notes computers it found (their owner should have removed them).
func (s *benchScratch) gc(dir string, wantNone bool) {
	drv, err := linux.New(linux.Config{StateDir: dir})
	if err != nil {
		s.note(true, "gc %s: %v", dir, err)
		return
	}
	gctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := drv.GC(gctx)
	switch {
	case err != nil:
		s.note(true, "gc %s: %v", dir, err)
	case r.Computers > 0 && wantNone:
		s.note(false, "%d computers were left in %s and removed by gc", r.Computers, dir)
	}
}

// sandbox makes the driver whose computers the bench runs in this process;
// close collects what they left.
func (s *benchScratch) sandbox() (sandbox.Driver, error) {
	dir := filepath.Join(s.root, "sandbox")
	drv, err := linux.New(linux.Config{StateDir: dir})
	if err != nil {
		return nil, fmt.Errorf("in-process computers: %w (--sandbox=false measures over HTTP only)", err)
	}
	s.undo = append(s.undo, func() { s.gc(dir, true) })
	return drv, nil
}

// startServer starts this binary's 'cubicle serve' with scfg's limits in
// its own directory root/dir; close stops it and collects what its
// computers left. label names it in messages when there are several ("":
// one); desc says how it is set up.
func (s *benchScratch) startServer(ctx context.Context, dir, label, desc string, scfg bench.ServerConfig) (*bench.Server, bench.ServerInfo, error) {
	which, prefix := "", ""
	if label != "" {
		which, prefix = " ("+label+")", label+" server: "
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, bench.ServerInfo{}, fmt.Errorf("find the cubicle binary: %w", err)
	}
	dir = filepath.Join(s.root, dir)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, bench.ServerInfo{}, err
	}
	scfg.Binary, scfg.Data = exe, dir
	fmt.Fprintf(os.Stderr, "starting cubicle serve (%s) in %s\n", desc, dir)
	srv, err := bench.StartServer(ctx, scfg)
	if err != nil {
		s.gc(dir, false)
		if label != "" {
			err = fmt.Errorf("%s server: %w", label, err)
		}
		return nil, bench.ServerInfo{}, err
	}
	fmt.Fprintf(os.Stderr, "cubicle serve%s is ready at %s\n", which, srv.URL)
	s.undo = append(s.undo, func() {
		fmt.Fprintf(os.Stderr, "stopping cubicle serve%s\n", which)
		stopErr := srv.Stop()
		if stopErr != nil {
			s.note(true, "%s%v; its log ends with:\n%s", prefix, stopErr, srv.LogTail(2048))
		}
		s.gc(dir, stopErr == nil)
	})
	return srv, bench.ServerInfo{Started: true, PoolSize: scfg.PoolSize, MaxConcurrent: scfg.MaxConcurrent, MemoryBudget: scfg.MemoryBudget}, nil
}

// close stops what was started, last first, removes the directory, and
// hands the notes to add, the report's AddNote (nil: there is no report;
// the notes were shown already).
func (s *benchScratch) close(add func(cleanup bool, format string, args ...any)) {
	for i := len(s.undo) - 1; i >= 0; i-- {
		s.undo[i]()
	}
	if err := bench.RemoveTree(s.root); err != nil {
		s.note(true, "%v", err)
	}
	if add == nil {
		return
	}
	for _, n := range s.notes {
		add(false, "%s", n)
	}
	if s.cleanupFailed {
		add(true, "clean-up incomplete")
	}
}

// checkBenchArgs makes the checks every server bench makes, in this order:
// no positional argument, the config's own (validateErr), a positive
// --timeout. bad says the command must stop with code.
func checkBenchArgs(fs *flag.FlagSet, fail func(format string, args ...any) int, validateErr error, timeout time.Duration) (code int, bad bool) {
	switch {
	case fs.NArg() > 0:
		return fail("unexpected argument %q", fs.Arg(0)), true
	case validateErr != nil:
		return fail("%v", validateErr), true
	case timeout <= 0:
		return fail("--timeout must be positive"), true
	}
	return 0, false
}

// closeInto closes s and hands its notes to rep, when the bench made a
// report (rep's AddNote).
func closeInto[R interface {
	*T
	AddNote(cleanup bool, format string, args ...any)
}, T any](s *benchScratch, rep R) {
	if rep == nil {
		s.close(nil)
		return
	}
	s.close(rep.AddNote)
}
