package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// Peer names accepted in Config.Peers.
const (
	PeerBwrap = "bwrap"
	PeerRunc  = "runc"
)

// Peers lists every peer the bench knows, in the order they are reported.
var Peers = []string{PeerBwrap, PeerRunc}

// Row IDs, stable for JSON consumers.
const (
	RowColdStart = "cubicle_cold_start"
	RowCreate    = "cubicle_create"
	RowKill      = "cubicle_kill"
	RowDestroy   = "cubicle_destroy"
	// The same four rows for a computer made from a template
	// (Config.Template).
	RowTemplateColdStart = "cubicle_template_cold_start"
	RowTemplateCreate    = "cubicle_template_create"
	RowTemplateKill      = "cubicle_template_kill"
	RowTemplateDestroy   = "cubicle_template_destroy"
	// A pause and resume cycle (cubicleResume).
	RowPause           = "cubicle_pause"
	RowResume          = "cubicle_resume"
	RowResumeFirstByte = "cubicle_resume_first_byte"
	RowExecTrue        = "cubicle_exec_true"
	RowExecEcho        = "cubicle_exec_echo"
	RowExecIdle        = "cubicle_exec_true_idle"
	RowHost            = "host_fork_exec"
	RowHostTrue        = "host_fork_exec_true"
	RowHostIdle        = "host_fork_exec_true_idle"
	RowBwrap           = "bwrap_start"
	RowRuncRun         = "runc_run"
	RowRuncExecTru     = "runc_exec_true"
	RowRuncExecEch     = "runc_exec_echo"
)

// Goal is a latency target: the p50 of Row should be at most Limit. One
// type serves the sandbox's, the service's and Python's targets, which
// are judged alike.
type Goal struct {
	Row   string
	What  string
	Limit time.Duration
}

// Targets are Cubicle's latency goals, judged on the p50 of a row.
var Targets = []Goal{
	{RowColdStart, "cold computer start to first byte", 30 * time.Millisecond},
	{RowExecTrue, "exec through the agent (/bin/true round trip)", 3 * time.Millisecond},
}

// DefaultTimeout bounds one run of a path unless Config.Timeout says
// otherwise.
const DefaultTimeout = 10 * time.Second

// consecutiveFailures disables a path that keeps failing, so a broken peer
// or computer does not cost n timeouts.
const consecutiveFailures = 3

// Config says what to measure.
type Config struct {
	Driver sandbox.Driver
	Spec   sandbox.Spec // the computers' limits; runc's cgroup limits copy them
	N      int          // timed runs per path
	Warmup int          // untimed runs per path before the timed ones
	Peers  []string     // PeerBwrap, PeerRunc
	// Timeout bounds one run of a path (a start, an exec, a teardown).
	// Default DefaultTimeout.
	Timeout time.Duration
	// TempDir holds the peers' bundles and state; default os.TempDir().
	TempDir string
	// Log receives progress and notes; default io.Discard.
	Log io.Writer
	// Template, when set, adds the cold start rows of a computer made
	// from that template (RowTemplateColdStart…), side by side with the
	// host template's.
	Template sandbox.Root
	// Idle, when at least 2, adds the idle-cost run (idle.go): that many
	// idle computers, what they cost, and exec with one and with all.
	Idle int
}

// Report is the result of Run.
type Report struct {
	Date    time.Time `json:"date"`
	Host    Host      `json:"host"`
	N       int       `json:"n"`
	Warmup  int       `json:"warmup"`
	Spec    SpecInfo  `json:"spec"`
	Rows    []Row     `json:"rows"`
	Targets []Target  `json:"targets"`
	Notes   []string  `json:"notes,omitempty"`
	// Failed is set when a timed run failed or a cubicle path could not
	// run at all; a missing or broken peer is only a note.
	Failed bool `json:"failed"`
	// CleanupFailed is set when something the bench made could not be
	// removed (the notes say what); it implies Failed.
	CleanupFailed bool `json:"cleanup_failed,omitempty"`
	// Idle is the idle-cost run's (Config.Idle).
	Idle *IdleReport `json:"idle,omitempty"`
}

// Host describes the machine the numbers were taken on.
type Host struct {
	Kernel   string `json:"kernel"`
	CPUs     int    `json:"cpus"`
	CPUModel string `json:"cpu_model,omitempty"`
	MemoryMB int64  `json:"memory_mb,omitempty"`
	Cgroup   string `json:"cgroup"`
	// LoadAvg is /proc/loadavg's 1, 5 and 15 minute averages when the run
	// started: other work on the machine skews every row.
	LoadAvg string `json:"load_avg,omitempty"`
}

// SpecInfo is the part of the computer spec that shapes the numbers.
type SpecInfo struct {
	MemoryBytes int64   `json:"memory_bytes"`
	Pids        int64   `json:"pids"`
	CPUs        float64 `json:"cpus"`
	DiskBytes   int64   `json:"disk_bytes"`
}

// Row is one measured quantity.
type Row struct {
	ID    string `json:"id"`
	Label string `json:"label"`
	Summary
	Failures int `json:"failures"`
}

// Target says whether a goal was met.
type Target struct {
	Row   string   `json:"row"`
	What  string   `json:"what"`
	Limit Duration `json:"limit_ms"`
	P50   Duration `json:"p50_ms"`
	Met   bool     `json:"met"`
}

// rowDef names a row a path produces.
type rowDef struct{ id, label string }

// path is one way of running a process that is measured.
type path struct {
	name     string
	required bool // a cubicle path (or the host floor): its failure fails the run
	rows     []rowDef
	setup    func(ctx context.Context) error // optional
	// sample runs the path once and returns one duration per row.
	sample func(ctx context.Context) (map[string]time.Duration, error)
	// close releases what setup made, within ctx (which is never the
	// cancelled one: see cleanup).
	close func(ctx context.Context) error // optional

	disabled bool
	noted    bool // its first failure was noted
	failRun  int  // failures in a row
	samples  map[string][]time.Duration
	failures int // failed timed runs
}

// Run measures every path and returns the report. It returns an error when
// it could not finish (ctx cancelled, a cubicle path that cannot even be set
// up); a failed timed run is only counted in the report. Everything it
// creates is removed before it returns; the report, non-nil once the
// config was accepted, says in Failed and Notes when that was incomplete.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Driver == nil {
		return nil, errors.New("bench: no driver")
	}
	if cfg.N < 1 {
		return nil, errors.New("bench: n must be at least 1")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	rep := &Report{
		Date: time.Now().UTC(), Host: hostInfo(), N: cfg.N, Warmup: cfg.Warmup,
		Spec: SpecInfo{cfg.Spec.MemoryBytes, cfg.Spec.Pids, cfg.Spec.CPUs, cfg.Spec.DiskBytes},
	}
	note := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		rep.Notes = append(rep.Notes, msg)
		fmt.Fprintln(cfg.Log, "note: "+msg)
	}

	// cleanup runs f with a context of its own: what a run made must be
	// removed also after Ctrl-C cancelled ctx, but removal must not hang.
	cleanup := func(name string, f func(ctx context.Context) error) {
		cctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := f(cctx); err != nil {
			note("%s: clean-up incomplete: %v", name, err)
			rep.Failed, rep.CleanupFailed = true, true
		}
	}

	host, hostIdle := hostForkExec(cfg)
	paths := []*path{cubicleCold(cfg), cubicleExec(cfg), cubicleExecIdle(cfg), host, hostIdle}
	if tp := cubicleTemplateCold(cfg); tp != nil {
		paths = append(paths[:1], append([]*path{tp}, paths[1:]...)...)
	}
	if rp := cubicleResume(cfg); rp != nil {
		paths = append(paths[:1], append([]*path{rp}, paths[1:]...)...)
	}
	peers, runc := peerPaths(cfg, note)
	if runc != nil {
		defer cleanup("runc", runc.close)
	}
	paths = append(paths, peers...)
	if err := measure(ctx, paths, cfg.N, cfg.Warmup, cfg.Log, note, cleanup); err != nil {
		return rep, err
	}
	var failed bool
	rep.Rows, failed = pathRows(paths)
	rep.Failed = rep.Failed || failed
	if cfg.Idle >= 2 {
		idle, rows, err := idleRun(ctx, cfg, note)
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
		if err != nil {
			note("%v", err)
			rep.Failed = true
		}
		rep.Idle, rep.Rows = idle, append(rep.Rows, rows...)
	}
	for _, t := range Targets {
		for _, r := range rep.Rows {
			if r.ID == t.Row && r.N > 0 {
				rep.Targets = append(rep.Targets, Target{Row: t.Row, What: t.What, Limit: Duration(t.Limit), P50: r.P50, Met: time.Duration(r.P50) <= t.Limit})
			}
		}
	}
	return rep, nil
}

// peerPaths are the paths of the peers cfg asks for; a peer that cannot run
// here is a note. runc, when not nil, is to be closed after its paths.
func peerPaths(cfg Config, note func(string, ...any)) (paths []*path, runc *runcEnv) {
	for _, peer := range Peers {
		if !contains(cfg.Peers, peer) {
			continue
		}
		switch peer {
		case PeerBwrap:
			p, err := bwrapPath(cfg)
			if err != nil {
				note("%v", err)
				continue
			}
			paths = append(paths, p)
		case PeerRunc:
			env, err := newRunc(cfg)
			if err != nil {
				note("%v", err)
				continue
			}
			runc = env
			paths = append(paths, env.runPath(), env.execPath())
		}
	}
	return paths, runc
}

// measure sets the paths up, runs warmup untimed and n timed iterations
// (interleaved), and releases them before it returns.
func measure(ctx context.Context, paths []*path, n, warmup int, log io.Writer, note func(string, ...any),
	cleanup func(string, func(context.Context) error)) error {
	defer closePaths(paths, cleanup)
	if err := setUp(ctx, paths, log, note); err != nil {
		return err
	}
	fmt.Fprintf(log, "warming up: %d untimed runs per path\n", warmup)
	for i := range warmup {
		if err := iteration(ctx, paths, i, false, note); err != nil {
			return err
		}
	}
	fmt.Fprintf(log, "measuring: %d runs per path, interleaved\n", n)
	every := max(1, n/10)
	for i := range n {
		if err := iteration(ctx, paths, i, true, note); err != nil {
			return err
		}
		if (i+1)%every == 0 || i+1 == n {
			fmt.Fprintf(log, "  %d/%d\n", i+1, n)
		}
	}
	return nil
}

// setUp gives every path its samples and runs its set-up. A required path
// that cannot be set up fails the run; another one is noted and disabled.
func setUp(ctx context.Context, paths []*path, log io.Writer, note func(string, ...any)) error {
	for _, p := range paths {
		p.samples = make(map[string][]time.Duration)
	}
	for _, p := range paths {
		if p.setup == nil {
			continue
		}
		fmt.Fprintf(log, "setting up %s\n", p.name)
		if err := p.setup(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if p.required {
				return fmt.Errorf("set up %s: %w", p.name, err)
			}
			note("%s: set-up failed, skipped: %v", p.name, err)
			p.disabled = true
		}
	}
	return nil
}

// closePaths closes the paths through cleanup, the last one first.
func closePaths(paths []*path, cleanup func(string, func(context.Context) error)) {
	for i := len(paths) - 1; i >= 0; i-- {
		if p := paths[i]; p.close != nil {
			cleanup(p.name, p.close)
		}
	}
}

// pathRows are the rows of paths, without those of a path that is not
// required and never ran (the notes say why); failed says that a required
// path was disabled or had a failed timed run.
func pathRows(paths []*path) (rows []Row, failed bool) {
	for _, p := range paths {
		if p.required && (p.disabled || p.failures > 0) {
			failed = true
		}
		for _, r := range p.rows {
			if !p.required && len(p.samples[r.id]) == 0 {
				continue
			}
			rows = append(rows, Row{ID: r.id, Label: r.label, Summary: Summarize(p.samples[r.id]), Failures: p.failures})
		}
	}
	return rows, failed
}

// iteration runs every enabled path once, starting at a different path each
// time so that no path always follows the same neighbour.
func iteration(ctx context.Context, paths []*path, i int, timed bool, note func(string, ...any)) error {
	for k := range paths {
		p := paths[(i+k)%len(paths)]
		if p.disabled {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		got, err := p.sample(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			p.failRun++
			if timed {
				p.failures++
			}
			if !p.noted {
				p.noted = true
				note("%s: run failed: %v", p.name, err)
			}
			// A peer that fails while warming up is not working on this
			// host; a cubicle path gets a few chances, as in timed runs.
			if p.failRun >= consecutiveFailures || (!timed && !p.required) {
				p.disabled = true
				note("%s: disabled after %d failed runs in a row", p.name, p.failRun)
			}
			continue
		}
		p.failRun = 0
		if timed {
			for id, d := range got {
				p.samples[id] = append(p.samples[id], d)
			}
		}
	}
	return nil
}

// cleanupTimeout bounds the removal of what one path made.
const cleanupTimeout = 2 * time.Minute

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func hostInfo() Host {
	h := Host{CPUs: runtime.NumCPU(), Cgroup: cgroupMode()}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		h.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				h.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			h.LoadAvg = strings.Join(f[:3], " ")
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err == nil {
			h.MemoryMB = kb >> 10
		}
	}
	return h
}

func cgroupMode() string {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return "v2"
	}
	if _, err := os.Stat("/sys/fs/cgroup/unified/cgroup.controllers"); err == nil {
		return "v1 (hybrid)"
	}
	return "v1"
}
