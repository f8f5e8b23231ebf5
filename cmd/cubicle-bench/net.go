package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/cubicle-sandbox/cubicle/internal/bench"
	"github.com/cubicle-sandbox/cubicle/internal/cliflag"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/linux"
)

const benchNetUsage = `Usage: cubicle-bench net [flags]

Measures internet computers (issue 13) in one run, side by side, in a test
internet of its own: a network namespace whose only link is loopback, with
an HTTP server on 198.51.100.10:80 and its DNS. Cubicle's egress (a
userspace TCP/IP stack per computer, in this process) dials into it, so
nothing leaves the machine. Prints p50, p90, p99, mean and n in
milliseconds, and Gbit/s:
  cubicle  curl in an internet computer allowed allowed.test: TCP connect
           (time_connect − time_namelookup), connect + GET, and the DNS
           lookup Cubicle answers
  host     the same curl run in the test internet's namespace (nsenter)
           against the same server: the floor
  download --downloads of --size from /bytes both ways, spread among the
           runs: Gbit/s (curl's speed_download) and this process's CPU
           per GiB (the test server runs here too, so the host's figure is
           the server's and the difference is Cubicle's path)
  create   Create() → ready of an internet computer and of a none one,
           and the Network.Attach() (TUN, stack) inside the former
Goals: ≤ 1 ms added per connect, ≥ 1 Gbit/s, Create() ≤ 5 ms slower (p50).
Runs are interleaved after untimed warm-up runs. Every computer, the test
internet's namespace and the temporary directory are removed afterwards,
also on Ctrl-C. Exits 0 when every run succeeded, 1 when one failed, 130
when interrupted. Needs root, /dev/net/tun, curl and nsenter.

Example:
  cubicle-bench net --n 100 --downloads 20 --size 256M --json

Flags:
`

func benchNet(args []string) int {
	fs := cliflag.NewFlags("cubicle-bench", "net", benchNetUsage)
	n := fs.Int("n", bench.DefaultNetN, "timed runs per latency path")
	warmup := fs.Int("warmup", 3, "untimed runs per path before (downloads: 1)")
	downloads := fs.Int("downloads", bench.DefaultNetDownloads, "timed downloads per path, spread among the runs (0: none)")
	sz := cliflag.Size{Bytes: bench.DefaultNetSize}
	fs.Var(&sz, "size", "bytes per download (at most 4G)")
	c := commonFlags(fs, os.TempDir(), "directory for the bench's temporary state (a fresh directory inside it, removed afterwards)",
		"bound on one run (a download: this per 256M)")
	if code, ok := cliflag.Parse(fs, args); !ok {
		return code
	}
	fail := benchUsageError("net")
	cfg := bench.NetConfig{Spec: sandbox.DefaultSpec(), N: *n, Warmup: *warmup, Downloads: *downloads, Size: sz.Bytes,
		Timeout: c.timeout.D, Log: os.Stderr}
	if code, bad := checkBenchArgs(fs, fail, cfg.Validate(), c.timeout.D, &c.cubicle); bad {
		return code
	}
	ctx, stop := benchContext()
	defer stop()
	rep, err := runBenchNet(ctx, cfg, c.place)
	return benchOutcome{
		name: "net", made: "computer, network namespace and directory", err: err,
		ctx:           ctx,
		cleanupFailed: rep != nil && rep.CleanupFailed,
		failed:        rep != nil && rep.Failed, failedWhat: "some runs failed",
		asJSON: c.asJSON, report: rep, table: func(w io.Writer) error { return bench.WriteNetTable(w, rep) },
	}.finish()
}

// runBenchNet makes a temporary directory in p.data for the computers'
// state, runs the bench, and removes everything it made: what the
// computers left is collected and the directory removed.
func runBenchNet(ctx context.Context, cfg bench.NetConfig, p place) (rep *bench.NetReport, err error) {
	root, err := os.MkdirTemp(p.data, "cubicle-bench-net-")
	if err != nil {
		return nil, fmt.Errorf("temporary directory: %w", err)
	}
	s := &benchScratch{root: root, cubicle: p.cubicle}
	defer func() { closeInto(s, rep) }()
	dir := filepath.Join(root, "sandbox")
	cfg.NewDriver = func(network sandbox.Network) (sandbox.Driver, error) {
		drv, err := linux.New(linux.Config{StateDir: dir, AgentPath: p.cubicle, Network: network})
		if err != nil {
			return nil, fmt.Errorf("computers: %w", err)
		}
		s.undo = append(s.undo, func() { s.gc(dir, true) })
		return drv, nil
	}
	return bench.RunNet(ctx, cfg)
}
