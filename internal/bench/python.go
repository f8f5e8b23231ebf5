package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// Row IDs of 'cubicle-bench python', stable for JSON consumers.
const (
	RowPyOnePlusOne         = "python_1plus1"
	RowPyOnePlusOneSSE      = "python_1plus1_sse"
	RowHostKernelOnePlusOne = "host_ipykernel_1plus1"
	RowDriverOnePlusOne     = "driver_python_1plus1"
	RowJupyterOnePlusOne    = "jupyter_server_1plus1"
	RowJupyterQuickAck      = "jupyter_server_1plus1_quickack"
	RowKGWOnePlusOne        = "kgw_1plus1"
	RowPyFirstWarm          = "python_first_cell_warm"
	RowPyFirstWarmCreate    = "python_first_cell_warm_create"
	RowPyFirstWarmCell      = "python_first_cell_warm_cell"
	RowPyFirstWarmMem       = "python_first_cell_warm_memory"
	RowPyFirstWarmMemCreate = "python_first_cell_warm_memory_create"
	RowPyFirstWarmMemCell   = "python_first_cell_warm_memory_cell"
	// A first plot in a pooled computer: the warm-up leaves matplotlib
	// to it (issue 15 goal 3's price).
	RowPyFirstPlotWarm       = "python_first_plot_warm"
	RowPyFirstPlotWarmCreate = "python_first_plot_warm_create"
	RowPyFirstPlotWarmCell   = "python_first_plot_warm_cell"
	RowPyFirstCold           = "python_first_cell_cold"
	RowPyFirstColdCreate     = "python_first_cell_cold_create"
	RowPyFirstColdCell       = "python_first_cell_cold_cell"
	// The same with 1+1 as the first cell: what a cell that uses no
	// prelude import waits for (the kernel's start; issue 15 goal 3).
	RowPyFirstColdPlain       = "python_first_cell_cold_plain"
	RowPyFirstColdPlainCreate = "python_first_cell_cold_plain_create"
	RowPyFirstColdPlainCell   = "python_first_cell_cold_plain_cell"
	// The kernel's CPU time (user+sys, ms) as a cell reads it: in a cold
	// computer after its first cell, and in a pool computer before any
	// (its start and the whole prelude: what a pool refill costs).
	RowPyKernelCPUCold      = "python_kernel_cpu_cold"
	RowPyKernelCPUColdPlain = "python_kernel_cpu_cold_plain"
	RowPyKernelCPUPool      = "python_kernel_cpu_pool"
)

const (
	// pythonSpeedupMinimum is the target: Cubicle's 1+1 at least this many
	// times faster than jupyter_server's (p50).
	pythonSpeedupMinimum = 5.0
	// kgwSpeedupMinimum is the target of Cubicle's Kernel Gateway API:
	// its 1+1 over the channels WebSocket at least this many times faster
	// than jupyter_server's with a local kernel (p50).
	kgwSpeedupMinimum = 4.0
	// pythonAPIOverDriverMaximum is the target of HTTP and the service on
	// 1+1: the API's p50 at most this much above the driver's, which is
	// the same request over the agent's socket (issue 15 goal 5).
	pythonAPIOverDriverMaximum = time.Millisecond
	// pythonFirstCellTimeout is the first cell's python timeout in seconds
	// (a cold one starts the kernel and runs the prelude first).
	pythonFirstCellTimeout = 120
	// firstCellMemoryMB is the memory the first-cell rows with a limit ask
	// for: half the default computer's (issue 15 goal 2).
	firstCellMemoryMB = 256
)

// PythonTargets are the Python goals judged on the p50 of a row.
var PythonTargets = []Goal{
	{RowPyOnePlusOne, "1+1 through the HTTP API (POST …/python)", 8 * time.Millisecond},
	{RowPyFirstWarm, "first cell in a new computer (warm pool)", 50 * time.Millisecond},
	{RowPyFirstWarmMem, "first cell, memory_mb set (warm pool)", 50 * time.Millisecond},
	// Issue 15 goal 3: a first cell that imports nothing heavy pays the
	// kernel's start; the pandas first cell (RowPyFirstCold) also pays
	// pandas and numpy (~0.45 s CPU) and is not judged.
	{RowPyFirstColdPlain, "first cell 1+1, no pooled kernel", 500 * time.Millisecond},
	{RowKGWOnePlusOne, "1+1 over the Kernel Gateway API's WebSocket", 10 * time.Millisecond},
}

// Defaults of 'cubicle-bench python'.
const (
	DefaultPythonN        = 100
	DefaultPythonFirstN   = 30
	DefaultPythonPoolSize = 2
	// DefaultPythonFirstTimeout bounds one first-cell sample (a cold one
	// starts a kernel and imports pandas) and a refill of the warm pool.
	DefaultPythonFirstTimeout = 3 * time.Minute
)

// PythonServer names a Cubicle server the bench measures.
type PythonServer struct {
	URL string
	Key string
	// PoolSize is the size of its warm pool (full: every computer in it
	// has a kernel that ran the prelude).
	PoolSize int
	Info     ServerInfo // described in the report
}

// PythonConfig says what 'cubicle-bench python' measures.
type PythonConfig struct {
	// Warm is a server with a warm pool of at least 2 and the default
	// prelude: the 1+1 round trips and the warm first cells go to it.
	Warm PythonServer
	// Cold is a server without a pool: its first cells start the kernel.
	// Empty URL: no cold rows.
	Cold PythonServer
	// Jupyter, when set, starts jupyter_server for the peer row.
	Jupyter *JupyterConfig
	// KGW also times 1+1 through the warm server's Jupyter Kernel Gateway
	// API: a kernel of its own (POST /api/kernels) and its channels
	// WebSocket, with the client that measures jupyter_server.
	KGW bool
	// HostKernel, when set, starts the floor: an ipykernel on the host
	// driven by Cubicle's kernel client (no computer, agent or HTTP).
	HostKernel *HostKernelConfig
	// Driver, when set, also times 1+1 in a computer of this driver called
	// in this process (no HTTP, no service), with Spec's limits; its
	// kernel runs Prelude first, as a pool computer's does.
	Driver  sandbox.Driver
	Spec    sandbox.Spec
	Prelude string
	N       int // timed 1+1 round trips per path
	// FirstN is the number of timed first cells per path (warm, cold),
	// spread evenly among the N round-trip iterations.
	FirstN int
	Warmup int // untimed round trips per path before; first cells get min(Warmup, 1)
	// Timeout bounds one round trip; FirstTimeout one first cell and one
	// refill of the warm pool.
	Timeout      time.Duration
	FirstTimeout time.Duration
	Log          io.Writer
}

// Validate checks the configuration in the words of the command's flags.
func (c PythonConfig) Validate() error {
	switch {
	case c.N < 1 || c.N > 100000:
		return fmt.Errorf("--n must be between 1 and 100000, got %d", c.N)
	case c.FirstN < 0 || c.FirstN > 10000:
		return fmt.Errorf("--first-n must be between 0 and 10000, got %d", c.FirstN)
	case c.Warmup < 0 || c.Warmup > 1000:
		return fmt.Errorf("--warmup must be between 0 and 1000, got %d", c.Warmup)
	case c.Timeout < 0 || c.FirstTimeout < 0:
		return errors.New("--timeout must be positive")
	}
	return nil
}

// JupyterInfo describes the jupyter_server that was measured.
type JupyterInfo struct {
	Version    string   `json:"version"`
	Python     string   `json:"python"`
	KernelArgv []string `json:"kernel_argv"`
}

// Speedup is how many times faster one row's p50 is than another's.
type Speedup struct {
	What    string   `json:"what"`
	Fast    string   `json:"fast_row"`
	Slow    string   `json:"slow_row"`
	FastP50 Duration `json:"fast_p50_ms"`
	SlowP50 Duration `json:"slow_p50_ms"`
	Ratio   float64  `json:"ratio"`
	// Minimum is the target ratio (0: none); Met says whether Ratio
	// reached it.
	Minimum float64 `json:"minimum,omitempty"`
	Met     bool    `json:"met"`
}

// Delta is the p50 of a row minus the p50 of the row under it.
type Delta struct {
	What    string   `json:"what"`
	Row     string   `json:"row"`
	Base    string   `json:"base_row"`
	P50     Duration `json:"p50_ms"`
	BaseP50 Duration `json:"base_p50_ms"`
	Delta   Duration `json:"delta_ms"`
	// Limit, when set, is the most Delta may be; Met says whether it was.
	Limit Duration `json:"limit_ms,omitempty"`
	Met   *bool    `json:"met,omitempty"`
}

// PythonReport is the result of RunPython.
type PythonReport struct {
	Date       time.Time    `json:"date"`
	Host       Host         `json:"host"`
	WarmServer ServerInfo   `json:"warm_server"`
	ColdServer *ServerInfo  `json:"cold_server,omitempty"`
	Jupyter    *JupyterInfo `json:"jupyter_server,omitempty"`
	N          int          `json:"n"`
	FirstN     int          `json:"first_n"`
	Warmup     int          `json:"warmup"`
	Rows       []Row        `json:"rows"`
	Speedups   []Speedup    `json:"speedups,omitempty"`
	Deltas     []Delta      `json:"deltas,omitempty"`
	Targets    []Target     `json:"targets"`
	Notes      []string     `json:"notes,omitempty"`
	// Failed is set when a timed run failed or a Cubicle path could not
	// run; a missing jupyter_server is only a note (and its target is not
	// judged).
	Failed        bool `json:"failed"`
	CleanupFailed bool `json:"cleanup_failed,omitempty"`
}

// AddNote records a note of the caller; cleanup says that something could
// not be removed.
func (r *PythonReport) AddNote(cleanup bool, format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
	if cleanup {
		r.Failed, r.CleanupFailed = true, true
	}
}

// RunPython measures, interleaved: 1+1 round trips through the warm
// server's API and through jupyter_server, and first cells in brand-new
// computers from the warm pool and cold. It returns an error when it could
// not finish; failed runs are counted in the report. Every computer,
// kernel and the jupyter_server it started are gone when it returns (the
// report says otherwise in CleanupFailed and Notes).
func RunPython(ctx context.Context, cfg PythonConfig) (*PythonReport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Warm.URL == "" {
		return nil, errors.New("bench: no server URL")
	}
	cfg.defaults()
	rep := &PythonReport{Date: time.Now().UTC(), Host: hostInfo(), WarmServer: cfg.Warm.Info, N: cfg.N, FirstN: cfg.FirstN, Warmup: cfg.Warmup}
	rep.WarmServer.URL, rep.WarmServer.PoolSize = cfg.Warm.URL, cfg.Warm.PoolSize
	var notes []string
	note := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		notes = append(notes, msg)
		fmt.Fprintln(cfg.Log, "note: "+msg)
	}
	defer func() { rep.Notes = append(notes, rep.Notes...) }()
	// undone notes a clean-up that failed.
	undone := func(format string, args ...any) {
		note(format, args...)
		rep.Failed, rep.CleanupFailed = true, true
	}

	warm, warmTr, closeWarm, err := openTracked(ctx, cfg.Warm, cfg.Timeout, "the server", undone)
	if err != nil {
		return rep, err
	}
	defer closeWarm()
	if cfg.Warm.PoolSize < 1 {
		note("the warm server has no pool: its first cells are cold ones")
	}
	pool := &poolWaiter{c: warm, full: cfg.Warm.PoolSize, timeout: cfg.FirstTimeout}
	fmt.Fprintf(cfg.Log, "waiting for the warm pool to fill (%d computers with a kernel that ran the prelude)\n", pool.full)
	if err := pool.wait(ctx); err != nil {
		return rep, err
	}

	rt := append([]*path{pyRoundTrip(warm, warmTr, pool, cfg)}, cfg.moreRoundTrips()...)
	if cfg.Jupyter != nil {
		ps, stop, err := startJupyterPaths(ctx, cfg, rep, note)
		if err != nil {
			return rep, err
		}
		if ps != nil {
			defer stop(undone)
			rt = append(rt, ps...)
		}
	}

	var fc []*path
	if cfg.FirstN > 0 {
		fc = append(fc, pyFirstWarm(warm, warmTr, pool, cfg, 0), pyFirstWarm(warm, warmTr, pool, cfg, firstCellMemoryMB),
			pyFirstPlotWarm(warm, warmTr, pool, cfg))
		if cfg.Warm.PoolSize > 0 {
			fc = append(fc, pyPoolKernelCPU(warm, warmTr, pool, cfg))
		}
		if cfg.Cold.URL != "" {
			cold, coldTr, closeCold, err := openTracked(ctx, cfg.Cold, cfg.Timeout, "the cold server", undone)
			if err != nil {
				return rep, err
			}
			defer closeCold()
			info := cfg.Cold.Info
			info.URL, info.PoolSize = cfg.Cold.URL, cfg.Cold.PoolSize
			rep.ColdServer = &info
			fc = append(fc, pyFirstCold(cold, coldTr, cfg), pyFirstColdPlain(cold, coldTr, cfg))
		}
	}

	if err := measurePython(ctx, rt, fc, cfg, note, func(name string, f func(context.Context) error) {
		cctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := f(cctx); err != nil {
			undone("%s: clean-up incomplete: %v", name, err)
		}
	}); err != nil {
		return rep, err
	}
	var failed bool
	rep.Rows, failed = pathRows(append(rt, fc...))
	rep.Failed = rep.Failed || failed
	rep.Speedups, rep.Deltas, rep.Targets = pythonVerdicts(rep.Rows)
	return rep, nil
}

// defaults fills in the zero timeouts and log.
func (c *PythonConfig) defaults() {
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.FirstTimeout <= 0 {
		c.FirstTimeout = DefaultPythonFirstTimeout
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
}

// moreRoundTrips are the round-trip paths besides the API's and
// jupyter_server's: the driver's, the host kernel's and the warm server's
// kernel gateway, as configured.
func (c PythonConfig) moreRoundTrips() []*path {
	var rt []*path
	if c.Driver != nil {
		rt = append(rt, driverRoundTrip(c))
	}
	if c.HostKernel != nil {
		rt = append(rt, hostRoundTrip(c))
	}
	if c.KGW {
		rt = append(rt, kgwRoundTrip(c))
	}
	return rt
}

// openTracked opens an API client of srv and checks its key (what names
// srv in the error); closeAll deletes the computers the tracker still holds,
// telling undone when it cannot, and closes the client.
func openTracked(ctx context.Context, srv PythonServer, timeout time.Duration, what string, undone func(string, ...any)) (c *apiClient, tr *tracker, closeAll func(), err error) {
	c, err = newAPIClient(srv.URL, srv.Key, 4, timeout)
	if err != nil {
		return nil, nil, nil, err
	}
	tr = &tracker{ids: map[string]bool{}}
	closeAll = func() {
		if err := tr.deleteAll(c); err != nil {
			undone("clean-up incomplete: %v", err)
		}
		c.close()
	}
	if err := c.check(ctx); err != nil {
		closeAll()
		return nil, nil, nil, fmt.Errorf("%s does not answer GET /v1/computers with this key: %w", what, err)
	}
	return c, tr, closeAll, nil
}

// startJupyterPaths starts cfg.Jupyter's jupyter_server and returns its
// round-trip paths and how to stop it. A jupyter_server that does not
// start is a note and no path, unless ctx is done.
func startJupyterPaths(ctx context.Context, cfg PythonConfig, rep *PythonReport, note func(string, ...any)) ([]*path, func(undone func(string, ...any)), error) {
	fmt.Fprintln(cfg.Log, "starting jupyter_server")
	j, err := StartJupyter(ctx, *cfg.Jupyter)
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, nil, ctx.Err()
	case err != nil:
		note("jupyter_server: %v; its row is skipped", err)
		return nil, nil, nil
	}
	fmt.Fprintf(cfg.Log, "jupyter_server %s is ready at %s\n", j.Version, j.URL)
	stop := func(undone func(string, ...any)) {
		fmt.Fprintln(cfg.Log, "stopping jupyter_server")
		if err := j.Stop(); err != nil {
			undone("jupyter_server: %v", err)
		}
	}
	rep.Jupyter = &JupyterInfo{Version: j.Version, Python: cfg.Jupyter.Python, KernelArgv: j.KernelArgv}
	if len(j.KernelArgv) == 0 || j.KernelArgv[0] != cfg.Jupyter.Python {
		note("jupyter_server's python3 kernel runs %q, not %s", j.KernelArgv, cfg.Jupyter.Python)
	}
	return jupyterRoundTrips(j, cfg), stop, nil
}

// measurePython sets the paths up, warms them up and runs them: every
// iteration runs the round-trip paths once, and the first-cell paths
// cfg.FirstN times in all, spread evenly over the N iterations, so that
// all rows see the same phases of the machine's load. Each path starts
// first in turn.
func measurePython(ctx context.Context, rt, fc []*path, cfg PythonConfig, note func(string, ...any),
	cleanup func(string, func(context.Context) error)) error {
	all := append(append([]*path(nil), rt...), fc...)
	defer closePaths(all, cleanup)
	if err := setUp(ctx, all, cfg.Log, note); err != nil {
		return err
	}
	fcWarmup := min(cfg.Warmup, 1)
	fmt.Fprintf(cfg.Log, "warming up: %d untimed round trips per path, %d first cells per path\n", cfg.Warmup, fcWarmup)
	for i := range cfg.Warmup {
		if err := iteration(ctx, rt, i, false, note); err != nil {
			return err
		}
	}
	if len(fc) > 0 {
		for i := range fcWarmup {
			if err := iteration(ctx, fc, i, false, note); err != nil {
				return err
			}
		}
	}
	fmt.Fprintf(cfg.Log, "measuring: %d round trips and %d first cells per path, interleaved\n", cfg.N, cfg.FirstN)
	every := max(1, cfg.N/10)
	k := 0
	for i := range cfg.N {
		if err := iteration(ctx, rt, i, true, note); err != nil {
			return err
		}
		for range spread(i, cfg.N, cfg.FirstN) {
			if len(fc) == 0 {
				break
			}
			if err := iteration(ctx, fc, k, true, note); err != nil {
				return err
			}
			k++
		}
		if (i+1)%every == 0 || i+1 == cfg.N {
			fmt.Fprintf(cfg.Log, "  %d/%d round trips, %d/%d first cells\n", i+1, cfg.N, k, cfg.FirstN)
		}
	}
	return nil
}

// spread is how many of m runs fall into iteration i of n, so that they
// are spread evenly and add up to m.
func spread(i, n, m int) int {
	return (i+1)*m/n - i*m/n
}

// pythonVerdicts judges the targets on rows: the latency targets, and
// Cubicle against jupyter_server (at least pythonSpeedupMinimum times
// faster), plus the warm pool against a cold start (no target).
func pythonVerdicts(rows []Row) ([]Speedup, []Delta, []Target) {
	byID := map[string]Row{}
	for _, r := range rows {
		byID[r.ID] = r
	}
	var sp []Speedup
	for _, s := range []struct {
		what, fast, slow string
		min              float64
	}{
		{"1+1: Cubicle's API vs jupyter_server", RowPyOnePlusOne, RowJupyterOnePlusOne, pythonSpeedupMinimum},
		{"1+1: Cubicle's kgw vs jupyter_server", RowKGWOnePlusOne, RowJupyterOnePlusOne, kgwSpeedupMinimum},
		{"1+1: Cubicle's API vs jupyter_server, quick ACKs", RowPyOnePlusOne, RowJupyterQuickAck, 0},
		{"1+1: Cubicle's kgw vs jupyter_server, quick ACKs", RowKGWOnePlusOne, RowJupyterQuickAck, 0},
		{"first cell: warm pool vs cold", RowPyFirstWarm, RowPyFirstCold, 0},
	} {
		f, okF := byID[s.fast]
		sl, okS := byID[s.slow]
		if !okF || !okS || f.N == 0 || sl.N == 0 || f.P50 <= 0 {
			continue
		}
		ratio := float64(sl.P50) / float64(f.P50)
		sp = append(sp, Speedup{What: s.what, Fast: s.fast, Slow: s.slow, FastP50: f.P50, SlowP50: sl.P50, Ratio: ratio,
			Minimum: s.min, Met: ratio >= s.min})
	}
	var ds []Delta
	for _, d := range []struct {
		what, row, base string
		limit           time.Duration
	}{
		{"1+1: the API over the host kernel (computer, agent, HTTP)", RowPyOnePlusOne, RowHostKernelOnePlusOne, 0},
		{"1+1: the API over the driver (HTTP and the service)", RowPyOnePlusOne, RowDriverOnePlusOne, pythonAPIOverDriverMaximum},
		{"1+1: the driver over the host kernel (computer and agent)", RowDriverOnePlusOne, RowHostKernelOnePlusOne, 0},
		{"1+1: jupyter_server over the host kernel", RowJupyterOnePlusOne, RowHostKernelOnePlusOne, 0},
		{"1+1: jupyter_server, quick ACKs, over the host kernel", RowJupyterQuickAck, RowHostKernelOnePlusOne, 0},
		{"1+1: kgw over the host kernel (computer, relay, WS)", RowKGWOnePlusOne, RowHostKernelOnePlusOne, 0},
	} {
		r, okR := byID[d.row]
		b, okB := byID[d.base]
		if okR && okB && r.N > 0 && b.N > 0 {
			x := Delta{What: d.what, Row: d.row, Base: d.base, P50: r.P50, BaseP50: b.P50, Delta: r.P50 - b.P50}
			if d.limit > 0 {
				met := time.Duration(x.Delta) <= d.limit
				x.Limit, x.Met = Duration(d.limit), &met
			}
			ds = append(ds, x)
		}
	}
	var ts []Target
	for _, t := range PythonTargets {
		if r, ok := byID[t.Row]; ok && r.N > 0 {
			ts = append(ts, Target{Row: t.Row, What: t.What, Limit: Duration(t.Limit), P50: r.P50, Met: time.Duration(r.P50) <= t.Limit})
		}
	}
	return sp, ds, ts
}

// PythonTempDirs makes the directories of a python bench run inside a
// fresh directory under parent: the root, jupyter_server's and the host
// kernel's.
func PythonTempDirs(parent string) (root, jupyter, host string, err error) {
	root, err = os.MkdirTemp(parent, "cubicle-bench-python-")
	if err != nil {
		return "", "", "", fmt.Errorf("temporary directory: %w", err)
	}
	jupyter, host = filepath.Join(root, "jupyter"), filepath.Join(root, "host-kernel")
	for _, d := range []string{jupyter, host} {
		if err := os.Mkdir(d, 0o700); err != nil {
			os.RemoveAll(root)
			return "", "", "", err
		}
	}
	return root, jupyter, host, nil
}
