package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/egress"
	"github.com/cubicle-sandbox/cubicle/internal/egress/egresstest"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// benchTB is the egresstest.TB of the net bench: Fatalf ends the goroutine
// run started with the error, Cleanup collects what close runs.
type benchTB struct {
	err      error
	cleanups []func()
}

func (t *benchTB) Helper() {}

func (t *benchTB) Fatalf(format string, args ...any) {
	t.err = fmt.Errorf(format, args...)
	runtime.Goexit()
}

func (t *benchTB) Cleanup(f func()) { t.cleanups = append(t.cleanups, f) }

// run runs f on a goroutine of its own, which Fatalf may end, and returns
// what Fatalf reported.
func (t *benchTB) run(f func()) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
	return t.err
}

// close runs the cleanups, the last one first.
func (t *benchTB) close() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
	t.cleanups = nil
}

// startInternet makes the test internet (egresstest: a network namespace
// whose only link is loopback). stop removes its servers and namespace,
// and says when the namespace is still there.
func startInternet() (in *egresstest.Internet, stop func() error, err error) {
	t := &benchTB{}
	err = t.run(func() {
		in = egresstest.New(t)
		in.Check(t)
	})
	stop = func() error {
		t.close()
		if in == nil {
			return nil
		}
		if _, err := os.Stat(in.Netns); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("the test internet's namespace %s was not removed", in.Netns)
		}
		return nil
	}
	if err != nil {
		return nil, nil, errors.Join(fmt.Errorf("test internet: %w", err), stop())
	}
	return in, stop, nil
}

// egressCounts counts the egress service's records by verdict: every
// connection of the bench should be allowed.
type egressCounts struct {
	mu       sync.Mutex
	verdicts map[string]int
	example  map[string]string // a rule or error of each verdict
}

func (e *egressCounts) add(r egress.Record) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.verdicts == nil {
		e.verdicts, e.example = map[string]int{}, map[string]string{}
	}
	e.verdicts[r.Verdict]++
	if _, ok := e.example[r.Verdict]; !ok {
		e.example[r.Verdict] = strings.TrimSpace(r.Rule + " " + r.Error)
	}
}

// unexpected describes the records that were not allowed ("" when none).
func (e *egressCounts) unexpected() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var parts []string
	for _, v := range []string{egress.Refused, egress.Failed} {
		if n := e.verdicts[v]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s (e.g. %s)", n, v, e.example[v]))
		}
	}
	return strings.Join(parts, ", ")
}

// timedNetwork times every attach of the Network it wraps, from Attach
// until its Link's Wait returns: the work an internet computer's network
// takes, done beside the agent's boot within Create().
type timedNetwork struct {
	sandbox.Network
	mu   sync.Mutex
	last time.Duration // the last attach's, until take
}

func (n *timedNetwork) Attach(ctx context.Context, a sandbox.Attachment) (sandbox.Link, error) {
	start := time.Now()
	l, err := n.Network.Attach(ctx, a)
	if err != nil {
		return nil, err
	}
	return &timedLink{Link: l, n: n, start: start}, nil
}

type timedLink struct {
	sandbox.Link
	n     *timedNetwork
	start time.Time
}

func (l *timedLink) Wait(ctx context.Context) error {
	err := l.Link.Wait(ctx)
	l.n.mu.Lock()
	l.n.last = time.Since(l.start)
	l.n.mu.Unlock()
	return err
}

// take returns the last Attach's time once, and false when there was none
// since the last take.
func (n *timedNetwork) take() (time.Duration, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	d := n.last
	n.last = 0
	return d, d > 0
}

// curlRunner runs curl with args and returns what it printed (stdout and,
// with --stderr -, its errors); maxTime is curl's --max-time in args, and
// the runner gives up a little after it.
type curlRunner func(ctx context.Context, args []string, maxTime time.Duration) (string, error)

// netComputer is the long-lived internet computer the cubicle curl paths
// run in.
type netComputer struct {
	spec    sandbox.Spec
	driver  sandbox.Driver
	timeout time.Duration
	sb      sandbox.Sandbox
}

func (c *netComputer) setup(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var err error
	c.sb, err = c.driver.Create(ctx, c.spec)
	return err
}

func (c *netComputer) close(ctx context.Context) error {
	if c.sb == nil {
		return nil
	}
	return c.sb.Destroy(ctx)
}

// curl is the curlRunner of the computer: curl runs in it as its user.
func (c *netComputer) curl(ctx context.Context, args []string, maxTime time.Duration) (string, error) {
	var out FirstByte
	st, err := execBounded(ctx, c.sb, maxTime+curlGrace, append([]string{"curl"}, args...), &out)
	if err := checkOutput(st, err, nil, ""); err != nil {
		return out.String(), fmt.Errorf("curl in the computer: %w: %s", err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// curlOnHost runs the host's curl inside the network namespace netns (the
// test internet), with nsenter.
func curlOnHost(curl, netns string) curlRunner {
	return func(ctx context.Context, args []string, maxTime time.Duration) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, maxTime+curlGrace)
		defer cancel()
		var out bytes.Buffer
		cmd := exec.CommandContext(ctx, "nsenter", append([]string{"--net=" + netns, "--", curl}, args...)...)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return out.String(), fmt.Errorf("curl on the host: %w: %s", err, strings.TrimSpace(out.String()))
		}
		return out.String(), nil
	}
}

// curlGrace is how long a runner waits for curl after its --max-time.
const curlGrace = 5 * time.Second

// selfCPU is the CPU time (user and system) this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
