package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cubicle-sandbox/cubicle/internal/bench"
	"github.com/cubicle-sandbox/cubicle/internal/cliflag"
	"github.com/cubicle-sandbox/cubicle/internal/config"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/linux"
	"github.com/cubicle-sandbox/cubicle/internal/template"
)

const benchUsage = `Usage: cubicle-bench sandbox [flags]

Measures in one run, side by side, how fast a computer starts and runs a
process, and prints p50, p90, p99, mean and n of each in milliseconds:
  cubicle  cold start: Create() until /bin/echo's first byte of output
           (also Create() alone, and Destroy() as its own row); with
           --template NAME, the same for a computer made from that
           template of the data directory's store
  cubicle  pause and resume of one computer: Pause(), Resume() until
           ready and until /bin/echo's first byte
  cubicle  exec in a running computer: /bin/true round trip, /bin/echo
           first byte
  host     /bin/echo started directly, the floor
  bwrap    /bin/echo with comparable isolation, fork to first byte
  runc     'runc run' of /bin/echo, and 'runc exec' into a running
           container (/bin/true round trip, /bin/echo first byte)
  idle     with --idle N (default 50, 0 for none): N idle computers of
           64M memory and 16M disk; threads per idle agent, the agent's
           RSS and PSS, this process's and the launcher's threads per
           computer, and /bin/true round trips with 1 computer and with N
           (issue 15 goal 6; run with --idle 1000 for the goal)
Runs are interleaved round-robin after untimed warm-up runs. A peer that
is not installed is skipped with a note. Every computer, container and
temporary directory is removed afterwards, also on Ctrl-C. Exits 0 when
every cubicle run succeeded, 1 when one failed, 130 when interrupted.

Example:
  cubicle-bench sandbox --n 100 --data /tmp/cubicle-bench --peers bwrap,runc --json
  cubicle-bench sandbox --n 30 --peers none --data /var/lib/cubicle --template debian
  cubicle-bench sandbox --n 200 --peers none --idle 1000 --data /var/tmp/cubicle-bench

Flags:
`

func benchSandbox(args []string) int {
	fs := cliflag.NewFlags("cubicle-bench", "sandbox", benchUsage)
	n := fs.Int("n", 50, "timed runs per path")
	warmup := fs.Int("warmup", 3, "untimed warm-up runs per path")
	peers := fs.String("peers", strings.Join(bench.Peers, ","), "peers to compare with, comma-separated ('none' for none)")
	tmpl := fs.String("template", "", "also measure computers made from this template (of <data>/templates)")
	idle := fs.Int("idle", 50, "idle computers of the idle-cost run (0: none)")
	c := commonFlags(fs, cliflag.DefaultData, "state directory for computers' disks and records", "bound on one run of a path")
	if code, ok := cliflag.Parse(fs, args); !ok {
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
	case c.timeout.D <= 0:
		return fail("--timeout must be positive")
	case *idle != 0 && (*idle < 2 || *idle > 10000):
		return fail("--idle must be 0 or between 2 and 10000, got %d", *idle)
	}
	if err := resolveCubicle(&c.cubicle); err != nil {
		return fail("%v", err)
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
	drv, err := linux.New(linux.Config{StateDir: c.data, AgentPath: c.cubicle})
	if err != nil {
		fmt.Fprintf(os.Stderr, "cubicle-bench sandbox: %v\n", err)
		return 1
	}
	drv.GC(ctx) // computers of killed earlier runs
	root, err := templateRoot(ctx, c.data, *tmpl)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cubicle-bench sandbox: --template: %v\n", err)
		return 1
	}
	rep, err := bench.Run(ctx, bench.Config{
		Driver: drv, Spec: sandbox.DefaultSpec(), N: *n, Warmup: *warmup,
		Peers: peerList, Timeout: c.timeout.D, Log: os.Stderr, Template: root, Idle: *idle,
	})
	return benchOutcome{
		name: "sandbox", made: "computer and container", err: err,
		ctx:           ctx,
		cleanupFailed: rep != nil && rep.CleanupFailed,
		failed:        rep != nil && rep.Failed, failedWhat: "some cubicle runs failed",
		asJSON: c.asJSON, report: rep, table: func(w io.Writer) error { return bench.WriteTable(w, rep) },
	}.finish()
}

// templateRoot is the root of the template name in data's store (the
// zero Root for "").
func templateRoot(ctx context.Context, data, name string) (sandbox.Root, error) {
	if name == "" {
		return sandbox.Root{}, nil
	}
	def := config.DefaultTemplate()
	st, err := template.Open(filepath.Join(data, "templates"), template.Limits{MaxBytes: int64(def.MaxBytes), MaxFiles: def.MaxFiles})
	if err != nil {
		return sandbox.Root{}, err
	}
	t, err := st.Get(ctx, name)
	if err != nil {
		return sandbox.Root{}, err
	}
	img, err := st.Image(ctx, t)
	if err != nil {
		return sandbox.Root{}, err
	}
	return sandbox.Root{Template: t.Name, Image: img, Python: t.Python}, nil
}
