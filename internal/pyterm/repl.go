package pyterm

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/kernel"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// The REPL reads the terminal in its normal (cooked) mode: the terminal
// edits the line, Ctrl-C is SIGINT and Ctrl-D at the start of a line is end
// of file. Nothing switches the terminal to raw mode, so nothing can leave
// it broken.

const (
	ps1 = ">>> "
	ps2 = "... "
	// interruptHint: after an interrupt the cell has this long to stop
	// before the REPL suggests cancelling it.
	interruptHint = 3 * time.Second
)

// RunREPL runs each input as a cell in the computer's session kernel until
// end of file on stdin. It returns the exit status.
func RunREPL(b Backend, opts Options, out *Renderer, sigc <-chan os.Signal) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// Start the kernel (and its prelude) while the user types.
	warmed := make(chan struct{})
	go func() { defer close(warmed); b.Warm(ctx) }()
	defer func() {
		cancel()
		select {
		case <-warmed:
		case <-time.After(5 * time.Second):
		}
	}()

	out.note(out.promptErr, fmt.Sprintf("Python in %s. Ctrl-C interrupts, Ctrl-D exits.", b.Describe()))
	r := &repl{b: b, opts: opts, out: out, sigc: sigc}
	lines := readLines(os.Stdin)
	var buf []string
	for {
		out.prompt(map[bool]string{true: ps2, false: ps1}[len(buf) > 0])
		select {
		case line, ok := <-lines:
			if !ok {
				out.note(out.promptErr, "")
				return 0
			}
			buf = append(buf, strings.TrimRight(line, "\r\n"))
			if len(buf) == 1 && strings.TrimSpace(buf[0]) == "" {
				buf = nil
				continue
			}
			if needMore(buf) {
				continue
			}
			code := strings.TrimRight(strings.Join(buf, "\n"), " \t\n") + "\n"
			buf = nil
			if exit, quit := r.execute(ctx, code); quit {
				return exit
			}
		case s := <-sigc:
			if s != os.Interrupt {
				return SignalStatus(s)
			}
			buf = nil
			out.note(out.promptErr, "\nKeyboardInterrupt")
		}
	}
}

// repl runs inputs.
type repl struct {
	b         Backend
	opts      Options
	out       *Renderer
	sigc      <-chan os.Signal
	ranBefore bool // a call ended: the kernel holds the user's state
}

type callEnd struct {
	res computer.PythonResult
	err error
}

// execute runs one input. The first Ctrl-C interrupts the kernel (the cell
// ends with KeyboardInterrupt, state kept); another one cancels the call,
// which escalates to a kernel restart if the cell still does not stop.
// quit says the REPL must end with status exit.
func (r *repl) execute(ctx context.Context, code string) (exit int, quit bool) {
	callCtx, cancelCall := context.WithCancel(ctx)
	defer cancelCall()
	done := make(chan callEnd, 1)
	go func() {
		res, err := r.b.Run(callCtx, computer.PythonRequest{Cells: []computer.PythonCell{{Code: code}}, Timeout: r.opts.Timeout}, r.out.output)
		done <- callEnd{res, err}
	}()
	interrupts := 0
	var hint <-chan time.Time
	for {
		select {
		case end := <-done:
			r.out.endLine()
			return r.report(end, callCtx.Err() != nil)
		case s := <-r.sigc:
			if s != os.Interrupt {
				cancelCall()
				select {
				case <-done:
				case <-time.After(10 * time.Second):
				}
				return SignalStatus(s), true
			}
			interrupts++
			if interrupts == 1 {
				hint = time.After(interruptHint)
				go func() {
					c, cancel := context.WithTimeout(ctx, 10*time.Second)
					defer cancel()
					if err := r.b.Interrupt(c); err != nil && ctx.Err() == nil {
						r.out.note(true, fmt.Sprintf("[interrupt failed: %v; press Ctrl-C again to cancel the cell]", err))
					}
				}()
			} else {
				hint = nil
				r.out.note(true, "[cancelling the cell]")
				cancelCall()
			}
		case <-hint:
			r.out.note(true, "[the cell did not stop: press Ctrl-C again to cancel it (this may restart the kernel)]")
		}
	}
}

// report prints how a call ended when its outputs do not say it.
func (r *repl) report(end callEnd, cancelled bool) (int, bool) {
	res, err := end.res, end.err
	if err != nil {
		switch {
		case cancelled:
			r.out.note(true, "[cell cancelled]")
			return 0, false
		case errors.Is(err, sandbox.ErrGone):
			r.out.note(true, fmt.Sprintf("cubicle python: %v", err))
			return 125, true
		}
		r.out.note(true, fmt.Sprintf("cubicle python: %v", err))
		return 0, false
	}
	if r.opts.JSON {
		r.out.printJSON(res)
	}
	if res.KernelRestarted && r.ranBefore {
		r.out.note(true, "[the Python kernel was restarted: earlier state is gone]")
	}
	r.ranBefore = true
	switch {
	case res.TimedOut:
		r.out.note(true, cmp.Or(res.Message, sandbox.PythonTimedOut(r.opts.seconds())))
	case res.Cancelled:
		r.out.note(true, "[cell cancelled]")
	case res.Status != "ok" && !hasError(res):
		r.out.note(true, cmp.Or(res.Message, "the cell failed"))
	}
	return 0, false
}

// hasError reports whether a traceback was shown for the call.
func hasError(res computer.PythonResult) bool {
	for _, c := range res.Cells {
		for _, o := range c.Outputs {
			if o.Type == kernel.OutError {
				return true
			}
		}
	}
	return false
}

// readLines delivers the lines of r (with their newline) until end of
// file; a last line without a newline is dropped, like the REPL's input
// when Ctrl-D ends it.
func readLines(r io.Reader) <-chan string {
	ch := make(chan string)
	go func() {
		defer close(ch)
		br := bufio.NewReader(r)
		for {
			s, err := br.ReadString('\n')
			if err != nil {
				return
			}
			ch <- s
		}
	}()
	return ch
}

// pyScan is what a scan of Python source found at its end.
type pyScan struct {
	depth int    // open brackets
	quote string // delimiter of an open string: ', ", ''' or """
	block bool   // a compound statement: a line ended with ':' outside brackets, or the first began with 'for', '@'...
	cont  bool   // the last line ends with a backslash continuation
}

// scanPython follows brackets, strings and comments through lines; enough
// to tell whether an input is complete, not a tokenizer.
func scanPython(lines []string) pyScan {
	var s pyScan
	for n, line := range lines {
		s.cont = false
		var last byte // last character outside strings and comments
		lastDepth := 0
		for i := 0; i < len(line); {
			c := line[i]
			if s.quote != "" {
				switch {
				case c == '\\':
					if i+1 >= len(line) {
						s.cont = true
					}
					i += 2
				case strings.HasPrefix(line[i:], s.quote):
					i += len(s.quote)
					s.quote, last, lastDepth = "", c, s.depth
				default:
					i++
				}
				continue
			}
			switch c {
			case '#':
				i = len(line)
				continue
			case '"', '\'':
				s.quote = string(c)
				if strings.HasPrefix(line[i:], strings.Repeat(s.quote, 3)) {
					s.quote = strings.Repeat(s.quote, 3)
				}
				i += len(s.quote)
				last, lastDepth = c, s.depth
				continue
			case '(', '[', '{':
				s.depth++
			case ')', ']', '}':
				if s.depth > 0 {
					s.depth--
				}
			case '\\':
				if i == len(line)-1 {
					s.cont = true
				}
			}
			if c != ' ' && c != '\t' {
				last, lastDepth = c, s.depth
			}
			i++
		}
		if len(s.quote) == 1 && !s.cont {
			s.quote = "" // a one-quote string ends with its line (the kernel reports the error)
		}
		if last == ':' && lastDepth == 0 && s.quote == "" {
			s.block = true
		}
		if n == 0 && opensBlock(line) {
			s.block = true
		}
	}
	return s
}

// compound are the keywords that start a compound statement: as in
// Python's REPL, one on a line of its own ('for i in x: f(i)') still waits
// for an empty line.
var compound = map[string]bool{"if": true, "for": true, "while": true, "def": true, "class": true,
	"with": true, "try": true, "async": true}

func opensBlock(line string) bool {
	line = strings.TrimSpace(line)
	if strings.HasPrefix(line, "@") {
		return true
	}
	end := strings.IndexFunc(line, func(r rune) bool {
		return !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	})
	return end > 0 && compound[line[:end]]
}

// needMore reports whether the lines typed so far need more: an open
// bracket, string or backslash continuation, or a block (a line ending with
// ':') not yet ended by an empty line.
func needMore(lines []string) bool {
	s := scanPython(lines)
	if s.quote != "" || s.depth > 0 || s.cont {
		return true
	}
	return s.block && strings.TrimSpace(lines[len(lines)-1]) != ""
}
