package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/cubicle-sandbox/cubicle/internal/bench"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/linux"
)

const benchTopUsage = `Usage: cubicle bench <benchmark> [flags]

Benchmarks:
  sandbox  computer start and exec latency, side by side with bwrap and runc

Example:
  cubicle bench sandbox --n 100 --data /tmp/cubicle-bench

Run 'cubicle bench sandbox --help' for its flags.
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
		fmt.Fprintln(os.Stderr, "cubicle bench: name what to measure (usage: cubicle bench sandbox [flags])")
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Print(benchTopUsage)
		return 0
	case "sandbox":
		return benchSandbox(args[1:])
	}
	fmt.Fprintf(os.Stderr, "cubicle bench: unknown benchmark %q (the only one is 'sandbox'; see 'cubicle bench --help')\n", args[0])
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
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "cubicle bench sandbox: "+format+"\n", args...)
		return 2
	}
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

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
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
	cleaned := "every computer and container it made was removed"
	if rep != nil && rep.CleanupFailed {
		cleaned = "clean-up was incomplete (see the notes above)"
	}
	switch {
	case errors.Is(err, context.Canceled):
		fmt.Fprintf(os.Stderr, "cubicle bench sandbox: interrupted; %s\n", cleaned)
		return 130
	case err != nil:
		fmt.Fprintf(os.Stderr, "cubicle bench sandbox: %v; %s\n", err, cleaned)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		enc.Encode(rep)
	} else {
		bench.WriteTable(os.Stdout, rep)
	}
	if rep.Failed {
		fmt.Fprintln(os.Stderr, "cubicle bench sandbox: some cubicle runs failed (see the notes)")
		return 1
	}
	return 0
}
