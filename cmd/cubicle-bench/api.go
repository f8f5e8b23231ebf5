package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/cubicle-sandbox/cubicle/internal/bench"
	"github.com/cubicle-sandbox/cubicle/internal/cliflag"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

const benchAPIUsage = `Usage: cubicle-bench api [flags]

Measures the computers API over real HTTP (one keep-alive client), side by
side in one run with the same operations on the sandbox driver called in
this process, and prints p50, p90, p99, mean and n in milliseconds:
  api      POST /v1/computers from a full warm pool (it waits for the
           pool to refill between creates), DELETE, exec /bin/true
           (unary JSON), /bin/echo's first byte streamed as SSE, and
           exec /bin/true after 300 ms idle in a computer of its own
  api      with --template NAME, also POST and DELETE of computers of
           that template, interleaved with the default's (the server
           must keep a warm pool for it: template.pools)
  cubicle  cold start, Create(), Destroy(), exec round trip and first
           byte, as in 'cubicle-bench sandbox'
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
  cubicle-bench api --n 200 --concurrency 50 --execs 100 --json
  cubicle-bench api --url http://127.0.0.1:8080 --key "$KEY" --sandbox=false
  cubicle-bench api --url http://127.0.0.1:8080 --key "$KEY" --sandbox=false --concurrency 0 --template debian

Flags:
`

func benchAPI(args []string) int {
	fs := cliflag.NewFlags("cubicle-bench", "api", benchAPIUsage)
	url := fs.String("url", "", "measure the server at this address instead of starting one (needs --key)")
	key := fs.String("key", "", "API key for --url (its org must allow computers)")
	n := fs.Int("n", bench.DefaultAPIN, "timed runs per latency path")
	warmup := fs.Int("warmup", 3, "untimed warm-up runs per path")
	concurrency := fs.Int("concurrency", bench.DefaultAPIConcurrency, "computers in the load phase, created at once (0: no load phase)")
	execs := fs.Int("execs", bench.DefaultAPIExecs, "execs of /bin/true per computer in the load phase")
	pool := fs.Int("pool", bench.DefaultAPIPoolSize, "warm pool size of the server it starts (with --url: read off /metrics)")
	tmpl := fs.String("template", "", "also time creates and deletes of computers of this template, from its warm pool (needs --url)")
	withSandbox := fs.Bool("sandbox", true, "also measure the sandbox driver in this process, for comparison")
	c := commonFlags(fs, os.TempDir(), "directory for the bench's temporary state (a fresh directory inside it, removed afterwards)", "bound on one request or run")
	if code, ok := cliflag.Parse(fs, args); !ok {
		return code
	}
	fail := benchUsageError("api")
	cfg := bench.APIConfig{URL: *url, Key: *key, N: *n, Warmup: *warmup, Concurrency: *concurrency, Execs: *execs,
		PoolSize: *pool, Template: *tmpl, Timeout: c.timeout.D, Spec: sandbox.DefaultSpec(), Log: os.Stderr}
	if *url != "" {
		cfg.PoolSize = -1
	}
	bin := &c.cubicle
	if *url != "" && !*withSandbox {
		bin = nil // another's server, no driver here: no binary to run
	}
	if code, bad := checkBenchArgs(fs, fail, cfg.Validate(), c.timeout.D, bin); bad {
		return code
	}
	switch {
	case *url == "" && (*pool < 1 || *pool > 1000):
		return fail("--pool must be between 1 and 1000, got %d", *pool)
	}

	ctx, stop := benchContext()
	defer stop()
	rep, err := runBenchAPI(ctx, cfg, c.place, *withSandbox)
	return benchOutcome{
		name: "api", made: "computer, server and directory", err: err,
		ctx:           ctx,
		cleanupFailed: rep != nil && rep.CleanupFailed,
		failed:        rep != nil && rep.Failed, failedWhat: "some runs or requests failed",
		asJSON: c.asJSON, report: rep, table: func(w io.Writer) error { return bench.WriteAPITable(w, rep) },
	}.finish()
}

// runBenchAPI makes a temporary directory in p.data, starts a server in it
// unless cfg names one, runs the bench, and removes everything it made:
// the server is stopped (it destroys its computers), what a kill left is
// collected, and the directory is removed. Clean-up problems become notes
// of the report (or go to stderr when there is none).
func runBenchAPI(ctx context.Context, cfg bench.APIConfig, p place, withSandbox bool) (rep *bench.APIReport, err error) {
	root, err := os.MkdirTemp(p.data, "cubicle-bench-api-")
	if err != nil {
		return nil, fmt.Errorf("temporary directory: %w", err)
	}
	s := &benchScratch{root: root, cubicle: p.cubicle}
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
