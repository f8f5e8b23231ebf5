package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/cubicle-sandbox/cubicle/internal/bench"
	"github.com/cubicle-sandbox/cubicle/internal/cliflag"
)

const benchGatewayUsage = `Usage: cubicle-bench gateway [flags]

Measures the Responses gateway (POST /v1/responses) of a 'cubicle serve' it
starts, whose only upstream is a zero-latency scripted Chat Completions
server inside the bench (streamed answers: one code_interpreter call
running print(1 + 1), then a short text), and prints p50, p95, p99, mean
and n in milliseconds:
  round     --n sequential responses with one tool round (pool full before
            each): the client's time, the server's (Server-Timing), the
            upstream handler's, the code_interpreter call's, the computer's
            create, and the gateway overhead per tool round: server total
            minus upstream, code and computer create (target ≤ 5 ms p50;
            the computer is deleted after the answer, untimed)
  streamed  --batches of --concurrency streamed responses at once (pool
            full before each batch): time to the first output_text.delta
            and to response.completed, throughput and errors
The server, its computers and the temporary directory are removed
afterwards, also on Ctrl-C. Exits 0 when every response succeeded, 1 when
one failed, 130 when interrupted.

Example:
  cubicle-bench gateway --n 50 --concurrency 20 --batches 3 --json

Flags:
`

func benchGateway(args []string) int {
	fs := cliflag.NewFlags("cubicle-bench", "gateway", benchGatewayUsage)
	n := fs.Int("n", bench.DefaultGatewayN, "sequential responses with one tool round")
	warmup := fs.Int("warmup", 3, "untimed sequential responses before")
	concurrency := fs.Int("concurrency", bench.DefaultGatewayConcurrency, "streamed responses at once")
	batches := fs.Int("batches", bench.DefaultGatewayBatches, "batches of --concurrency streamed responses (0: none)")
	pool := fs.Int("pool", bench.DefaultGatewayConcurrency, "warm pool size of the server (kernels ran the default prelude)")
	c := commonFlags(fs, os.TempDir(), "directory for the bench's temporary state (a fresh directory inside it, removed afterwards)", "bound on one response (pool refills: 3m)")
	if code, ok := cliflag.Parse(fs, args); !ok {
		return code
	}
	fail := benchUsageError("gateway")
	cfg := bench.GatewayConfig{N: *n, Warmup: *warmup, Concurrency: *concurrency, Batches: *batches,
		PoolSize: *pool, Timeout: c.timeout.D, Log: os.Stderr}
	if code, bad := checkBenchArgs(fs, fail, cfg.Validate(), c.timeout.D, &c.cubicle); bad {
		return code
	}
	switch {
	case *pool < 0 || *pool > 64:
		return fail("--pool must be between 0 and 64, got %d", *pool)
	}
	ctx, stop := benchContext()
	defer stop()
	rep, err := runBenchGateway(ctx, cfg, c.place)
	return benchOutcome{
		name: "gateway", made: "computer, server, upstream and directory", err: err,
		ctx:           ctx,
		cleanupFailed: rep != nil && rep.CleanupFailed,
		failed:        rep != nil && rep.Failed, failedWhat: "some responses failed",
		asJSON: c.asJSON, report: rep, table: func(w io.Writer) error { return bench.WriteGatewayTable(w, rep) },
	}.finish()
}

// runBenchGateway starts the scripted upstream and a server using it in a
// temporary directory inside p.data, runs the bench, and removes
// everything it made.
func runBenchGateway(ctx context.Context, cfg bench.GatewayConfig, p place) (rep *bench.GatewayReport, err error) {
	root, err := os.MkdirTemp(p.data, "cubicle-bench-gateway-")
	if err != nil {
		return nil, err
	}
	s := &benchScratch{root: root, cubicle: p.cubicle}
	defer func() { closeInto(s, rep) }()
	up, err := bench.StartGatewayUpstream()
	if err != nil {
		return nil, err
	}
	s.undo = append(s.undo, func() {
		if err := up.Close(); err != nil {
			s.note(false, "stopping the scripted upstream: %v", err)
		}
	})
	scfg := gatewayServer(cfg, up.URL)
	srv, info, err := s.startServer(ctx, "server", "", fmt.Sprintf("pool %d, gateway upstream %s", cfg.PoolSize, up.URL), scfg)
	if err != nil {
		return nil, err
	}
	cfg.URL, cfg.Key, cfg.Info, cfg.Upstream = srv.URL, srv.Key, info, up
	return bench.RunGateway(ctx, cfg)
}

// gatewayServer is the server the gateway bench starts: room for a batch's
// computers or the pool, whichever is larger (a pool above max_concurrent
// is a config error), and a few more.
func gatewayServer(cfg bench.GatewayConfig, upstream string) bench.ServerConfig {
	return bench.ServerConfig{PoolSize: cfg.PoolSize, MaxConcurrent: max(cfg.Concurrency, cfg.PoolSize) + 8, MemoryBudget: "16G",
		Env: []string{"CUBICLE_GATEWAY_UPSTREAM_URL=" + upstream, "CUBICLE_GATEWAY_MODEL=bench"}}
}
