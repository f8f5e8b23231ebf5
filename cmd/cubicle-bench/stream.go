package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/cubicle-sandbox/cubicle/internal/bench"
	"github.com/cubicle-sandbox/cubicle/internal/cliflag"
)

const benchStreamUsage = `Usage: cubicle-bench stream [flags]

Measures process output streamed through the API (issue 15 goal 4), side
by side in one run with the same command's output read from a host pipe:
  host      sh -c COMMAND on the host, its stdout read by this process
  cubicle   POST /v1/computers/{id}/exec with the same command: SSE
            (text as UTF-8 events, random bytes and NULs as base64
            events) and the binary stream (Accept:
            application/vnd.cubicle.stream) for every kind
  baseline  with --baseline, a second server from another cubicle binary
            (e.g. main's, built in a detached worktree), the same
            requests (the binary stream when its /openapi.json names
            it): before and after in one run
The commands write --size bytes: text is yes lines, random a 32M file of
random bytes again and again, zeros /dev/zero. Prints MiB/s (p50, slowest,
fastest), the ratio to the host pipe, and CPU seconds per GiB of each
process in the path (/proc/PID/stat around each run): the server, the
computer's agent, the command (what the agent reaped; on the host, this
process's children) and this process (the reader). The targets judge,
for each kind, the fastest way through the API against the host pipe. It
starts each server itself (pool 0, in a temporary directory) and removes
everything afterwards, also on Ctrl-C. Exits 0 when every run succeeded,
1 when one failed, 130 when interrupted. Needs root.

Example:
  cubicle-bench stream --n 5 --size 512M --baseline /tmp/main/bin/cubicle

Flags:
`

func benchStream(args []string) int {
	fs := cliflag.NewFlags("cubicle-bench", "stream", benchStreamUsage)
	n := fs.Int("n", bench.DefaultStreamN, "timed runs per path")
	warmup := fs.Int("warmup", 1, "untimed runs per path before")
	sz := cliflag.Size{Bytes: bench.DefaultStreamSize}
	fs.Var(&sz, "size", "bytes of output per run")
	baseline := fs.String("baseline", "", "a second cubicle binary to measure side by side (the same requests)")
	c := commonFlags(fs, os.TempDir(), "directory for the bench's temporary state (a fresh directory inside it, removed afterwards)",
		"bound on one run per 256M of --size")
	c.timeout.D = bench.DefaultStreamTimeout // a slow path on a busy host takes its time
	fs.Lookup("timeout").DefValue = c.timeout.String()
	if code, ok := cliflag.Parse(fs, args); !ok {
		return code
	}
	fail := benchUsageError("stream")
	cfg := bench.StreamConfig{N: *n, Warmup: *warmup, Size: sz.Bytes, Timeout: c.timeout.D, Log: os.Stderr}
	if code, bad := checkBenchArgs(fs, fail, cfg.Validate(), c.timeout.D, &c.cubicle); bad {
		return code
	}
	if *baseline != "" {
		if err := resolveCubicle(baseline); err != nil {
			return fail("--baseline: %v", err)
		}
	}
	ctx, stop := benchContext()
	defer stop()
	rep, err := runBenchStream(ctx, cfg, c.place, *baseline)
	return benchOutcome{
		name: "stream", made: "computer, server and directory", err: err,
		ctx:           ctx,
		cleanupFailed: rep != nil && rep.CleanupFailed,
		failed:        rep != nil && rep.Failed, failedWhat: "some runs failed",
		asJSON: c.asJSON, report: rep, table: func(w io.Writer) error { return bench.WriteStreamTable(w, rep) },
	}.finish()
}

// runBenchStream makes a temporary directory in p.data, starts the
// server under test (and the baseline's, when given) in it, runs the
// bench and removes everything it made.
func runBenchStream(ctx context.Context, cfg bench.StreamConfig, p place, baseline string) (rep *bench.StreamReport, err error) {
	root, err := os.MkdirTemp(p.data, "cubicle-bench-stream-")
	if err != nil {
		return nil, fmt.Errorf("temporary directory: %w", err)
	}
	s := &benchScratch{root: root, cubicle: p.cubicle}
	defer func() { closeInto(s, rep) }()
	cfg.Scratch = root
	servers := []struct{ label, binary string }{{"cubicle", p.cubicle}}
	if baseline != "" {
		servers = append(servers, struct{ label, binary string }{"baseline", baseline})
	}
	for _, sv := range servers {
		scfg := bench.ServerConfig{Binary: sv.binary, PoolSize: 0, MaxConcurrent: 4, MemoryBudget: "4G"}
		srv, _, err := s.startServer(ctx, sv.label, sv.label, "pool 0, max_concurrent 4, "+sv.binary, scfg)
		if err != nil {
			return nil, err
		}
		binary, err := bench.ServesBinaryStream(ctx, srv.URL)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", sv.label, err)
		}
		cfg.Servers = append(cfg.Servers, bench.StreamServer{Label: sv.label, Binary: sv.binary, URL: srv.URL, Key: srv.Key,
			PID: srv.PID(), BinaryStream: binary})
	}
	return bench.RunStream(ctx, cfg)
}
