// Command cubicle-bench measures Cubicle side by side with its peers
// (internal/bench): the sandbox against bwrap and runc, the HTTP API, Python
// against jupyter_server, the Responses gateway, and internet computers'
// network in a test internet. It is a command of its own so that the
// server binary carries no bench code; it runs the cubicle binary
// (--cubicle) as the servers it measures and as the agent of the computers
// it starts in-process.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/bench"
	"github.com/cubicle-sandbox/cubicle/internal/cliflag"
)

const benchTopUsage = `Usage: cubicle-bench <benchmark> [flags]

Benchmarks:
  sandbox  computer start and exec latency, side by side with bwrap and runc
  api      the computers API over HTTP (create, exec, delete, load), side by
           side with the same operations on the sandbox driver
  python   Python over HTTP: 1+1 round trip side by side with jupyter_server,
           and the first cell of a new computer with the warm pool vs. cold
  gateway  the Responses gateway with a zero-latency upstream: overhead per
           tool round, and concurrent streamed responses
  net      internet computers in a test internet: TCP connect, download
           Gbit/s and CPU per GiB through Cubicle side by side with curl on
           the host, and Create() next to a computer without network
  stream   process output through the API (SSE text, base64, the binary
           stream) MiB/s and server CPU per GiB next to a host pipe

Examples:
  cubicle-bench sandbox --n 100 --data /tmp/cubicle-bench
  cubicle-bench api --n 200 --concurrency 50 --execs 100
  cubicle-bench python --n 100
  cubicle-bench gateway --n 50 --concurrency 20
  cubicle-bench net --n 100 --downloads 20 --size 256M
  cubicle-bench stream --n 5 --size 512M --baseline /tmp/main/bin/cubicle

Run 'cubicle-bench <benchmark> --help' for its flags.
`

func main() { os.Exit(dispatch(os.Args[1:])) }

func dispatch(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "cubicle-bench: name what to measure (usage: cubicle-bench sandbox|api|python|gateway|net|stream [flags])")
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Print(benchTopUsage)
		return 0
	case "sandbox":
		return benchSandbox(args[1:])
	case "api":
		return benchAPI(args[1:])
	case "python":
		return benchPython(args[1:])
	case "gateway":
		return benchGateway(args[1:])
	case "net":
		return benchNet(args[1:])
	case "stream":
		return benchStream(args[1:])
	}
	fmt.Fprintf(os.Stderr, "cubicle-bench: unknown benchmark %q (known: sandbox, api, python, gateway, net, stream; see 'cubicle-bench --help')\n", args[0])
	return 2
}

// benchContext is cancelled by Ctrl-C, SIGTERM and SIGHUP, so that every
// bench removes what it made before it exits.
func benchContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
}

// benchUsageError returns what reports a bad flag of 'cubicle-bench name'
// and gives the usage exit code.
func benchUsageError(name string) func(format string, args ...any) int {
	return func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "cubicle-bench "+name+": "+format+"\n", args...)
		return 2
	}
}

// benchOutcome is how a bench ended; finish reports it the same way for
// every bench.
type benchOutcome struct {
	name          string          // as in 'cubicle-bench <name>'
	made          string          // what it makes and removes, for the clean-up line
	ctx           context.Context // the bench's (benchContext): its end is the signal's
	err           error
	cleanupFailed bool
	failed        bool   // some runs failed; the report's notes say which
	failedWhat    string // says so in the bench's words
	asJSON        bool
	report        any // printed as JSON
	table         func(io.Writer) error
}

// finish prints an error with what became of the clean-up, or the report,
// and returns the exit code: 130 interrupted, 1 failed, 0 otherwise.
func (o benchOutcome) finish() int {
	prefix := "cubicle-bench " + o.name + ":"
	cleaned := "every " + o.made + " it made was removed"
	if o.cleanupFailed {
		cleaned = "clean-up was incomplete (see the notes above)"
	}
	switch {
	case errors.Is(o.err, context.Canceled) && o.ctx.Err() != nil:
		fmt.Fprintf(os.Stderr, "%s interrupted; %s\n", prefix, cleaned)
		return 130
	case o.err != nil:
		fmt.Fprintf(os.Stderr, "%s %v; %s\n", prefix, o.err, cleaned)
		return 1
	}
	if o.asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		enc.Encode(o.report)
	} else {
		o.table(os.Stdout)
	}
	if o.failed {
		fmt.Fprintf(os.Stderr, "%s %s (see the notes)\n", prefix, o.failedWhat)
		return 1
	}
	return 0
}

// checkBenchArgs makes the checks every server bench makes, in this order:
// no positional argument, the config's own (validateErr), a positive
// --timeout, a cubicle binary (resolveCubicle) unless cubicle is nil (the
// bench runs none). bad says the command must stop with code.
func checkBenchArgs(fs *flag.FlagSet, fail func(format string, args ...any) int, validateErr error, timeout time.Duration,
	cubicle *string) (code int, bad bool) {
	switch {
	case fs.NArg() > 0:
		return fail("unexpected argument %q", fs.Arg(0)), true
	case validateErr != nil:
		return fail("%v", validateErr), true
	case timeout <= 0:
		return fail("--timeout must be positive"), true
	}
	if cubicle == nil {
		return 0, false
	}
	if err := resolveCubicle(cubicle); err != nil {
		return fail("%v", err), true
	}
	return 0, false
}

// place is where a bench keeps its state (--data) and the cubicle binary
// it runs (--cubicle).
type place struct{ data, cubicle string }

// common are the flags every bench has: --data, --json, --timeout and
// --cubicle.
type common struct {
	place
	asJSON  bool
	timeout cliflag.Duration
}

// commonFlags adds the flags every bench has to fs; data and timeout get
// the bench's own default and help.
func commonFlags(fs *flag.FlagSet, dataDefault, dataHelp, timeoutHelp string) *common {
	c := &common{timeout: cliflag.Duration{D: bench.DefaultTimeout}}
	fs.StringVar(&c.data, "data", dataDefault, dataHelp)
	fs.BoolVar(&c.asJSON, "json", false, "print the report as JSON")
	fs.Var(&c.timeout, "timeout", timeoutHelp)
	fs.StringVar(&c.cubicle, "cubicle", "", "the cubicle binary that runs the servers and the agent of the computers started in this process "+
		"(default: cubicle next to this binary, else on $PATH)")
	return c
}

// resolveCubicle replaces *path (--cubicle) with the absolute path of the
// binary it names: a path, or a name looked up on $PATH; "" is cubicle
// next to this executable (bin/cubicle beside bin/cubicle-bench), else on
// $PATH.
func resolveCubicle(path *string) error {
	p := *path
	if p == "" {
		p = "cubicle"
		if exe, err := os.Executable(); err == nil {
			if next := filepath.Join(filepath.Dir(exe), "cubicle"); isFile(next) {
				p = next
			}
		}
	}
	found, err := exec.LookPath(p)
	if err != nil {
		return fmt.Errorf("--cubicle: %w", err)
	}
	*path, err = filepath.Abs(found)
	return err
}

func isFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// closeInto closes s and hands its notes to rep, when the bench made a
// report (rep's AddNote).
func closeInto[R interface {
	*T
	AddNote(cleanup bool, format string, args ...any)
}, T any](s *benchScratch, rep R) {
	if rep == nil {
		s.close(nil)
		return
	}
	s.close(rep.AddNote)
}
