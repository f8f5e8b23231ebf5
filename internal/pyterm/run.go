package pyterm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// Options are what the command line asks of the calls and the renderer.
type Options struct {
	// Timeout bounds each call (all cells of -c/FILE, or one REPL input),
	// in whole seconds.
	Timeout time.Duration
	JSON    bool // print each result as JSON instead of the outputs
	Reset   bool // restart the kernel before the first cell
	SaveDir string
	// Body is the JSON of a result (JSON): the REST API's body,
	// httpapi.PythonBody, so both print the same.
	Body func(computer.PythonResult) any
}

// seconds is the timeout as the messages count it.
func (o Options) seconds() int { return int(o.Timeout / time.Second) }

// UntilSignal is a context cancelled by the first signal on sigc (see
// CaughtSignal); stop ends the watch.
func UntilSignal(sigc <-chan os.Signal) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() {
		select {
		case s := <-sigc:
			cancel(signalError{s})
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(nil) }
}

type signalError struct{ sig os.Signal }

func (e signalError) Error() string { return "caught " + e.sig.String() }

// CaughtSignal is the signal that cancelled ctx, or nil.
func CaughtSignal(ctx context.Context) os.Signal {
	var se signalError
	if errors.As(context.Cause(ctx), &se) {
		return se.sig
	}
	return nil
}

// SignalStatus is the exit status after a signal: 128+N.
func SignalStatus(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return 128 + int(n)
	}
	return 130
}

// RunCells runs one call and maps its end to the exit status.
func RunCells(b Backend, cells []computer.PythonCell, opts Options, out *Renderer, sigc <-chan os.Signal) int {
	ctx, stop := UntilSignal(sigc)
	go func() {
		<-ctx.Done()
		if CaughtSignal(ctx) == syscall.SIGPIPE {
			out.silence() // what the interrupted cell still says has no reader
		}
	}()
	res, err := b.Run(ctx, computer.PythonRequest{Cells: cells, Timeout: opts.Timeout, Reset: opts.Reset}, out.output)
	stop()
	out.endLine()
	if sig := CaughtSignal(ctx); sig != nil {
		if sig != syscall.SIGPIPE { // after SIGPIPE nobody reads: say nothing
			fmt.Fprintf(os.Stderr, "cubicle python: interrupted%s\n", b.InterruptedNote())
		}
		return SignalStatus(sig)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "cubicle python: %v\n", err)
		return 125
	}
	if opts.JSON {
		out.printJSON(res)
	}
	_, remote := b.(*Remote)
	return summarize(res, opts.seconds(), remote)
}

// summarize prints the one line that explains a call that did not succeed
// (to stderr) and returns the exit status. kept: the computer outlives the
// call, so a lost kernel state matters.
func summarize(res computer.PythonResult, timeout int, kept bool) int {
	if res.KernelRestarted && res.Status != "ok" && kept {
		defer fmt.Fprintln(os.Stderr, "cubicle python: the Python kernel was restarted; earlier state is gone")
	}
	switch {
	case res.TimedOut:
		msg := res.Message
		if !strings.HasPrefix(msg, "Command timed out") {
			msg = sandbox.PythonTimedOut(timeout)
		}
		fmt.Fprintln(os.Stderr, msg)
		return 124
	case res.Cancelled:
		fmt.Fprintf(os.Stderr, "cubicle python: cancelled%s\n", sentence(res.Message))
		return 130
	case res.Status == "ok":
		return 0
	}
	msg := res.Message
	if msg == "" {
		msg = "a cell failed"
		if res.FailedCell != nil {
			msg = "cell " + cellName(res, *res.FailedCell) + " failed"
		}
	}
	skipped := 0
	for _, c := range res.Cells {
		if c.Status == sandbox.CellSkipped {
			skipped++
		}
	}
	if skipped > 0 {
		msg = strings.TrimSuffix(msg, ".") + fmt.Sprintf("; %d later cell(s) not run", skipped)
	}
	fmt.Fprintf(os.Stderr, "cubicle python: %s\n", msg)
	return 1
}

func sentence(s string) string {
	if s == "" {
		return ""
	}
	return ": " + s
}

// cellName is "2" or "2 (title)", counting from 1 like the service's messages.
func cellName(res computer.PythonResult, i int) string {
	if i >= 0 && i < len(res.Cells) && res.Cells[i].Title != "" {
		return fmt.Sprintf("%d (%s)", i+1, res.Cells[i].Title)
	}
	return strconv.Itoa(i + 1)
}

// SplitCells cuts a file at '# %%' lines (the percent format of Jupytext,
// VS Code and Spyder). Code before the first marker is a cell of its own;
// sections with no code, and '# %% [markdown]' ones, are skipped.
func SplitCells(src string) []computer.PythonCell {
	var cells []computer.PythonCell
	var cur []string
	title, skip := "", false
	flush := func() {
		code := strings.Join(cur, "\n")
		if !skip && strings.TrimSpace(code) != "" {
			cells = append(cells, computer.PythonCell{Code: strings.TrimRight(code, "\n \t") + "\n", Title: title})
		}
		cur = nil
	}
	for _, line := range strings.Split(strings.ReplaceAll(src, "\r\n", "\n"), "\n") {
		if rest, ok := strings.CutPrefix(line, "# %%"); ok {
			flush()
			title = strings.TrimSpace(rest)
			skip = strings.HasPrefix(title, "[markdown]") || strings.HasPrefix(title, "[md]")
			continue
		}
		cur = append(cur, line)
	}
	flush()
	return cells
}
