package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sync"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/client"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// Row IDs of 'cubicle-bench api', stable for JSON consumers. The in-process
// sandbox rows keep their ids from Run (RowColdStart, RowExecTrue...).
const (
	RowAPICreate = "api_create_warm_pool"
	RowAPIDelete = "api_delete"
	// RowAPITemplateCreate and RowAPITemplateDelete are the same for a
	// computer of APIConfig.Template, from that template's warm pool.
	RowAPITemplateCreate = "api_template_create_warm_pool"
	RowAPITemplateDelete = "api_template_delete"
	RowAPIExecTrue       = "api_exec_true"
	RowAPIExecEcho       = "api_exec_echo_sse"
	RowAPIExecIdle       = "api_exec_true_idle"
	RowLoadCreate        = "load_create"
	RowLoadExecTrue      = "load_exec_true"
	RowLoadDelete        = "load_delete"
)

// APITargets are the service's latency goals, judged on the p50 of a row.
var APITargets = []Goal{
	{RowAPICreate, "create from the warm pool (POST /v1/computers)", 5 * time.Millisecond},
	{RowAPIExecTrue, "exec /bin/true through HTTP (POST …/exec)", 4 * time.Millisecond},
	{RowAPIExecIdle, "exec through HTTP after 300 ms idle", 3 * time.Millisecond},
}

// Defaults of 'cubicle-bench api'.
const (
	DefaultAPIN           = 200
	DefaultAPIConcurrency = 50
	DefaultAPIExecs       = 100
	DefaultAPIPoolSize    = 4
)

// APIConfig says what 'cubicle-bench api' measures.
type APIConfig struct {
	// URL and Key name the server. Both are empty when the caller starts
	// one itself (Validate accepts that; RunAPI needs them set).
	URL string
	Key string
	// Driver, when set, also measures the same operations in this process,
	// without HTTP (cold start, Create, Destroy, exec), interleaved with the
	// HTTP ones, so the table shows what HTTP adds.
	Driver sandbox.Driver
	Spec   sandbox.Spec // the in-process computers' limits
	N      int          // timed runs per latency path
	Warmup int          // untimed runs per path before
	// Concurrency computers are created at once for the load phase, and
	// each then runs Execs execs of /bin/true in sequence, all in
	// parallel. Concurrency 0 skips the load phase.
	Concurrency int
	Execs       int
	// PoolSize is how many computers the server's warm pool holds when full;
	// every timed create waits for that first. Negative: read it off
	// /metrics (the depth once it stops growing).
	PoolSize int
	// Template, when set, adds the create and delete rows for computers
	// of that template (`"template": NAME`), interleaved with the default
	// template's: the server must keep a warm pool for it
	// (template.pools) so that both rows time a pool claim.
	Template string
	// Timeout bounds one request (and one in-process run). Default
	// DefaultTimeout.
	Timeout time.Duration
	Server  ServerInfo // described in the report
	// ServerPID is the server's process when it runs on this host (0:
	// unknown): the load phase then reports its CPU time and its
	// computers'.
	ServerPID int
	Log       io.Writer // progress and notes; default io.Discard
}

// Validate checks the configuration and names the first bad setting in
// the words of the command's flags.
func (c APIConfig) Validate() error {
	switch {
	case (c.URL == "") != (c.Key == ""):
		return errors.New("--url and --key go together: give both to use a running server, or neither to start one")
	case c.N < 1 || c.N > 100000:
		return fmt.Errorf("--n must be between 1 and 100000, got %d", c.N)
	case c.Warmup < 0 || c.Warmup > 1000:
		return fmt.Errorf("--warmup must be between 0 and 1000, got %d", c.Warmup)
	case c.Concurrency < 0 || c.Concurrency > 10000:
		return fmt.Errorf("--concurrency must be between 0 (no load phase) and 10000, got %d", c.Concurrency)
	case c.Concurrency > 0 && (c.Execs < 1 || c.Execs > 1000000):
		return fmt.Errorf("--execs must be between 1 and 1000000, got %d", c.Execs)
	case c.PoolSize > 10000:
		return fmt.Errorf("--pool must be at most 10000, got %d", c.PoolSize)
	case c.Timeout < 0:
		return errors.New("--timeout must be positive")
	case c.Template != "" && c.URL == "":
		return errors.New("--template needs --url and --key: a server whose data directory has that template and a warm pool for it (template.pools)")
	}
	if c.URL != "" {
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--url %q is not an http:// or https:// address like http://127.0.0.1:8080", c.URL)
		}
		if u.Path != "" && u.Path != "/" || u.RawQuery != "" {
			return fmt.Errorf("--url %q: give the server's root, without a path", c.URL)
		}
	}
	return nil
}

// ServerInfo describes the server that was measured.
type ServerInfo struct {
	URL string `json:"url"`
	// Started is true when the bench started the server itself.
	Started       bool   `json:"started"`
	PoolSize      int    `json:"pool_size"`
	MaxConcurrent int    `json:"max_concurrent,omitempty"`
	MemoryBudget  string `json:"memory_budget,omitempty"`
}

// APIReport is the result of RunAPI.
type APIReport struct {
	Date   time.Time  `json:"date"`
	Host   Host       `json:"host"`
	Server ServerInfo `json:"server"`
	N      int        `json:"n"`
	Warmup int        `json:"warmup"`
	Spec   SpecInfo   `json:"spec"`
	// Rows are the latency rows: in-process sandbox rows first (when a
	// driver was given), then the same operations over HTTP.
	Rows []Row `json:"rows"`
	// Overheads compare the p50 of an HTTP row with its in-process twin.
	Overheads []Overhead `json:"overheads,omitempty"`
	Load      *Load      `json:"load,omitempty"`
	Targets   []Target   `json:"targets"`
	Notes     []string   `json:"notes,omitempty"`
	// Failed is set when a timed run or a load request failed, or a
	// path could not run at all.
	Failed bool `json:"failed"`
	// CleanupFailed is set when something the bench made could not be
	// removed (the notes say what); it implies Failed.
	CleanupFailed bool `json:"cleanup_failed,omitempty"`
}

// Overhead is an HTTP row's p50 next to its in-process twin's.
type Overhead struct {
	What    string   `json:"what"`
	API     string   `json:"api_row"`
	Sandbox string   `json:"sandbox_row"`
	APIP50  Duration `json:"api_p50_ms"`
	SbP50   Duration `json:"sandbox_p50_ms"`
	Delta   Duration `json:"delta_ms"`
}

// Load is the result of the load phase.
type Load struct {
	Computers int `json:"computers"`
	ExecsEach int `json:"execs_each"`
	// Rows: the creates (all at once), every exec, the deletes (all at
	// once). Failures counts failed requests of each kind.
	Rows []Row `json:"rows"`
	// Execs is how many execs succeeded, in Seconds of wall time from the
	// start of the exec phase until the last one returned.
	Execs      int     `json:"execs"`
	Seconds    float64 `json:"seconds"`
	Throughput float64 `json:"execs_per_second"`
	// CPUBusy is the share of the host's CPU time that was not idle during
	// the exec phase (0–1); CPUPerExec splits it by process. Both describe
	// this host, which is the server's unless --url names another.
	CPUBusy    float64     `json:"cpu_busy,omitempty"`
	CPUPerExec *CPUPerExec `json:"cpu_per_exec,omitempty"`
	// Errors counts every failed request, 429s included; Refused counts
	// the 429s (capacity_exceeded) alone. Skipped execs were not sent
	// because their computer was not created or kept failing.
	Errors  int  `json:"errors"`
	Refused int  `json:"refused_429"`
	Skipped int  `json:"skipped_execs"`
	OK      bool `json:"ok"`
}

// overheadPairs name the in-process twin of each HTTP row.
var overheadPairs = []struct{ what, api, sb string }{
	{"exec /bin/true round trip", RowAPIExecTrue, RowExecTrue},
	{"exec /bin/echo → first byte (SSE)", RowAPIExecEcho, RowExecEcho},
	{"delete: DELETE vs Kill()", RowAPIDelete, RowKill},
	{"create: POST from the pool vs a cold Create()", RowAPICreate, RowCreate},
}

// RunAPI measures a running server over HTTP: creates from its warm pool,
// execs (unary and SSE), deletes, interleaved with the same operations on
// in-process computers, then the load phase. It returns an error when it
// could not finish (ctx cancelled, server unreachable, a path that cannot
// be set up); failed requests are counted in the report. Every computer it
// created is deleted before it returns; the report, non-nil once the
// config was accepted, says in CleanupFailed and Notes when that was
// incomplete.
func RunAPI(ctx context.Context, cfg APIConfig) (*APIReport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.URL == "" {
		return nil, errors.New("bench: no server URL")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	rep := &APIReport{Date: time.Now().UTC(), Host: hostInfo(), Server: cfg.Server, N: cfg.N, Warmup: cfg.Warmup}
	rep.Server.URL = cfg.URL
	if cfg.Driver != nil {
		rep.Spec = SpecInfo{cfg.Spec.MemoryBytes, cfg.Spec.Pids, cfg.Spec.CPUs, cfg.Spec.DiskBytes}
	}
	note := rep.note(cfg.Log)

	c, err := newAPIClient(cfg.URL, cfg.Key, cfg.Concurrency+4, cfg.Timeout)
	if err != nil {
		return rep, err
	}
	defer c.close()
	tr := &tracker{ids: map[string]bool{}}
	defer func() {
		if err := tr.deleteAll(c); err != nil {
			note("clean-up incomplete: %v", err)
			rep.Failed, rep.CleanupFailed = true, true
		}
	}()

	if err := c.check(ctx); err != nil {
		return rep, fmt.Errorf("the server does not answer GET /v1/computers with this key: %w", err)
	}
	pool := &poolWaiter{c: c, full: cfg.PoolSize, timeout: cfg.Timeout}
	if pool.full < 0 {
		fmt.Fprintln(cfg.Log, "reading the warm pool's size off /metrics")
		if err := pool.discover(ctx); err != nil {
			return rep, err
		}
	}
	rep.Server.PoolSize = pool.full
	if pool.full == 0 {
		note("the server's warm pool is empty (pool_size 0?): the create row measures cold starts")
	}

	var paths []*path
	if cfg.Driver != nil {
		scfg := Config{Driver: cfg.Driver, Spec: cfg.Spec, Timeout: cfg.Timeout}
		paths = append(paths, cubicleCold(scfg), cubicleExec(scfg))
	}
	paths = append(paths, apiCreatePath(c, tr, pool, ""), apiExecPath(c, tr, pool), apiExecIdlePath(c, tr, pool))
	if cfg.Template != "" {
		paths = append(paths, apiCreatePath(c, tr, pool, cfg.Template))
	}
	if err := measure(ctx, paths, cfg.N, cfg.Warmup, cfg.Log, note, rep.cleanup(note)); err != nil {
		return rep, err
	}
	var failed bool
	rep.Rows, failed = pathRows(paths)
	rep.Failed = rep.Failed || failed
	rep.Overheads = overheads(rep.Rows)

	if cfg.Concurrency > 0 {
		load, err := runLoad(ctx, c, tr, pool, cfg, note)
		rep.Load = load
		if err != nil {
			return rep, err
		}
		if !load.OK {
			rep.Failed = true
		}
	}
	rep.Targets = targets(rep.Rows)
	return rep, nil
}

// note returns a function that records a note and logs it.
func (r *APIReport) note(log io.Writer) func(string, ...any) {
	var mu sync.Mutex
	return func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		mu.Lock()
		r.Notes = append(r.Notes, msg)
		mu.Unlock()
		fmt.Fprintln(log, "note: "+msg)
	}
}

// AddNote records a note of the caller (such as the server's clean-up);
// cleanup says that something could not be removed.
func (r *APIReport) AddNote(cleanup bool, format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
	if cleanup {
		r.Failed, r.CleanupFailed = true, true
	}
}

// cleanup returns what measure uses to release a path: with a context of
// its own, since ctx may be the cancelled one, and bounded.
func (r *APIReport) cleanup(note func(string, ...any)) func(string, func(context.Context) error) {
	return func(name string, f func(ctx context.Context) error) {
		cctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := f(cctx); err != nil {
			note("%s: clean-up incomplete: %v", name, err)
			r.Failed, r.CleanupFailed = true, true
		}
	}
}

func overheads(rows []Row) []Overhead {
	byID := map[string]Row{}
	for _, r := range rows {
		byID[r.ID] = r
	}
	var out []Overhead
	for _, p := range overheadPairs {
		a, okA := byID[p.api]
		s, okS := byID[p.sb]
		if !okA || !okS || a.N == 0 || s.N == 0 {
			continue
		}
		out = append(out, Overhead{What: p.what, API: p.api, Sandbox: p.sb, APIP50: a.P50, SbP50: s.P50, Delta: a.P50 - s.P50})
	}
	return out
}

// targets judges the sandbox's and the service's targets on rows.
func targets(rows []Row) []Target {
	var out []Target
	for _, list := range [][]Goal{Targets, APITargets} {
		for _, t := range list {
			for _, r := range rows {
				if r.ID == t.Row && r.N > 0 {
					out = append(out, Target{Row: t.Row, What: t.What, Limit: Duration(t.Limit), P50: r.P50, Met: time.Duration(r.P50) <= t.Limit})
				}
			}
		}
	}
	return out
}

// apiCreatePath times POST /v1/computers with a full warm pool, waits for
// the pool to refill (untimed), then times DELETE of that computer. With
// a template it creates computers of that template (its own rows).
func apiCreatePath(c *apiClient, tr *tracker, pool *poolWaiter, template string) *path {
	name, create, del := "api create and delete", RowAPICreate, RowAPIDelete
	rows := []rowDef{
		{RowAPICreate, "api      POST /v1/computers (warm pool)"},
		{RowAPIDelete, "api      DELETE /v1/computers/{id}"},
	}
	if template != "" {
		name, create, del = "api create and delete on template "+template, RowAPITemplateCreate, RowAPITemplateDelete
		rows = []rowDef{
			{create, "api      POST /v1/computers (warm pool, template " + template + ")"},
			{del, "api      DELETE /v1/computers/{id} (template " + template + ")"},
		}
	}
	return &path{
		name: name, required: true, rows: rows,
		sample: func(ctx context.Context) (map[string]time.Duration, error) {
			if err := pool.wait(ctx); err != nil {
				return nil, err
			}
			id, dc, err := c.createReq(ctx, client.CreateRequest{Template: template})
			if err != nil {
				return nil, err
			}
			tr.add(id)
			// The claim started a refill (a cold start on the server);
			// let it finish so that the DELETE is timed on a quiet server.
			if err := pool.wait(ctx); err != nil {
				return nil, err
			}
			dd, err := c.delete(ctx, id)
			if err != nil {
				return nil, err
			}
			tr.remove(id)
			return map[string]time.Duration{create: dc, del: dd}, nil
		},
	}
}

// apiExecPath times execs over HTTP into one computer made at set-up: a
// unary /bin/true round trip and /bin/echo's first streamed byte (SSE).
func apiExecPath(c *apiClient, tr *tracker, pool *poolWaiter) *path {
	var id string
	return ownComputer(&path{
		name: "api exec", required: true,
		rows: []rowDef{
			{RowAPIExecTrue, "api      exec /bin/true round trip"},
			{RowAPIExecEcho, "api      exec /bin/echo → first byte (SSE)"},
		},
		sample: func(ctx context.Context) (map[string]time.Duration, error) {
			rt, err := c.exec(ctx, id, trueArgv, "")
			if err != nil {
				return nil, fmt.Errorf("/bin/true: %w", err)
			}
			fb, err := c.execSSE(ctx, id, echoArgv, echoOutput)
			if err != nil {
				return nil, fmt.Errorf("/bin/echo: %w", err)
			}
			return map[string]time.Duration{RowAPIExecTrue: rt, RowAPIExecEcho: fb}, nil
		},
	}, &id, c, tr, pool)
}

// apiIdleGap is how long the computer of the after-idle row sits idle
// before each exec: an agent's model thinks between calls (issue 15
// goal 1 asks for ≥ 300 ms).
const apiIdleGap = 300 * time.Millisecond

// apiExecIdlePath times a /bin/true round trip over HTTP into a computer of
// its own that nothing has used for apiIdleGap: the exec an agent makes
// after a pause, rather than back to back.
func apiExecIdlePath(c *apiClient, tr *tracker, pool *poolWaiter) *path {
	var id string
	return ownComputer(&path{
		name: "api exec after idle", required: true,
		rows: []rowDef{{RowAPIExecIdle, fmt.Sprintf("api      exec /bin/true after %v idle", apiIdleGap)}},
		sample: func(ctx context.Context) (map[string]time.Duration, error) {
			if err := sleepCtx(ctx, apiIdleGap); err != nil {
				return nil, err
			}
			rt, err := c.exec(ctx, id, trueArgv, "")
			if err != nil {
				return nil, fmt.Errorf("/bin/true: %w", err)
			}
			return map[string]time.Duration{RowAPIExecIdle: rt}, nil
		},
	}, &id, c, tr, pool)
}
