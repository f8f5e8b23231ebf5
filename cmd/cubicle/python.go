package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image"
	_ "image/png" // DecodeConfig of saved images
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/config"
	"github.com/cubicle-sandbox/cubicle/internal/kernel"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/linux"
	"github.com/cubicle-sandbox/cubicle/internal/termimage"
)

const pythonUsage = `Usage: cubicle python [flags] [-c CODE | FILE]

Runs Python in a real Jupyter kernel. Without --computer it creates a fresh
local computer (like 'cubicle run') and destroys it at the end; with
--computer ID it uses that computer of a 'cubicle serve' server (its URL from
--url or CUBICLE_URL, the API key from CUBICLE_KEY, never from a flag).

What runs:
  -c CODE      one cell
  FILE         each '# %%' section is a cell, titled by the text after '# %%'
               ('# %% [markdown]' sections are skipped); FILE '-' is stdin
  (nothing)    a terminal on stdin starts an interactive REPL: state persists
               between inputs, a line ending in ':' or inside open brackets or
               quotes continues ('... ') until an empty line, Ctrl-C interrupts
               the running cell (twice: cancels it) or discards the input,
               Ctrl-D exits. Stdin that is not a terminal is read as one cell.
Cells run in order in one kernel; the first failing cell stops the rest.

Output: printed as it happens. Standard output gets the cells' stdout,
results and displays; standard error gets their stderr, tracebacks and the
one-line summary of a failed or timed-out call. Images are shown inline in
kitty, Ghostty, iTerm2 and WezTerm when stdout is that terminal, otherwise
saved as cubicle-out-<n>.png (in the current directory or --save-dir) with a
note "[image saved to <path> (<w>x<h>)]". --json prints instead the whole
result as JSON, the same as POST /v1/computers/{id}/python answers.

Exit status: 0 all cells ran, 1 a cell failed, 124 timeout ("Command timed
out after <n> seconds"), 125 a failure of cubicle or of the server, 2 bad
usage, 128+N after signal N (130: Ctrl-C; 141: the reader of stdout left).
The REPL exits 0 on Ctrl-D whatever its inputs did.

Example:
  cubicle python -c 'import sys; print(sys.version)'
  cubicle python --timeout 60 analysis.py
  CUBICLE_KEY=cub_... cubicle python --computer cmp_123 --url http://10.0.0.5:8080 -c 'df.describe()'

Flags:
`

const (
	defaultCubicleURL = "http://127.0.0.1:8080"
	cellSkipped       = "skipped"
)

// pythonOpts is what the flags ask for.
type pythonOpts struct {
	timeout int // seconds
	json    bool
	reset   bool
	saveDir string
}

func pythonCmd(args []string) int {
	fs := newFlags("python", pythonUsage)
	code := fs.String("c", "", "run `CODE` as one cell")
	computerID := fs.String("computer", "", "use this computer of a server instead of a fresh local one")
	serverURL := fs.String("url", envOr("CUBICLE_URL", defaultCubicleURL), "server URL for --computer (env CUBICLE_URL)")
	timeout := &durationFlag{30 * time.Second}
	fs.Var(timeout, "timeout", "time limit of each call (all cells of -c/FILE, or one REPL input), 1s to 10m")
	jsonOut := fs.Bool("json", false, "print the result as JSON instead of the outputs")
	saveDir := fs.String("save-dir", ".", "directory for images the terminal cannot show")
	reset := fs.Bool("reset", false, "restart the computer's kernel before the first cell (state is lost)")
	noPrelude := fs.Bool("no-prelude", false, "local computer: skip the prelude (numpy as np, pandas as pd, matplotlib.pyplot as plt)")
	memory := &sizeFlag{sandbox.DefaultMemory}
	disk := &sizeFlag{sandbox.DefaultDisk}
	var env listFlag
	fs.Var(memory, "memory", "local computer: memory limit")
	fs.Var(disk, "disk", "local computer: disk size for /workspace")
	fs.Var(&env, "env", "local computer: environment variable NAME=value (repeatable)")
	cpus := fs.Float64("cpus", sandbox.DefaultCPUs, "local computer: CPU limit in cores (0: no hard limit)")
	keep := fs.Bool("keep", false, "local computer: keep the workspace and print its path instead of deleting it")
	data := fs.String("data", defaultData, "local computer: state directory for computers' disks and records")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "cubicle python: "+format+" (see 'cubicle python --help')\n", a...)
		return 2
	}
	rest := fs.Args()
	switch {
	case len(rest) > 1:
		return usageErr("give at most one FILE, got %d arguments", len(rest))
	case len(rest) == 1 && set["c"]:
		return usageErr("give -c CODE or FILE, not both")
	case timeout.d < time.Second || timeout.d > sandbox.MaxPythonTimeout:
		return usageErr("--timeout must be between 1s and %ds, got %s", int(sandbox.MaxPythonTimeout/time.Second), timeout.d)
	case *computerID == "" && set["url"]:
		return usageErr("--url needs --computer")
	}
	if *computerID != "" {
		for _, name := range []string{"memory", "disk", "env", "cpus", "keep", "data", "no-prelude"} {
			if set[name] {
				return usageErr("--%s applies to a local computer, not to --computer", name)
			}
		}
	}
	opts := pythonOpts{timeout: int((timeout.d + time.Second - 1) / time.Second), json: *jsonOut, reset: *reset, saveDir: *saveDir}

	// Check the target before reading any input.
	var remote *remotePython
	spec := sandbox.DefaultSpec()
	prelude := config.DefaultPrelude
	if *computerID != "" {
		key := os.Getenv("CUBICLE_KEY")
		if key == "" {
			fmt.Fprintln(os.Stderr, "cubicle python: --computer needs an API key in the environment variable CUBICLE_KEY (it is never taken from a flag, which other users can see in ps)")
			return 2
		}
		u, err := url.Parse(*serverURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return usageErr("--url %q is not an http:// or https:// URL", *serverURL)
		}
		remote = &remotePython{base: strings.TrimRight(u.String(), "/"), id: *computerID, key: key, hc: &http.Client{}}
	} else {
		spec.MemoryBytes, spec.DiskBytes, spec.CPUs, spec.Env = memory.bytes, disk.bytes, *cpus, env
		if err := spec.Validate(); err != nil {
			fmt.Fprintf(os.Stderr, "cubicle python: %s\n", flagError(err))
			return 2
		}
		if *noPrelude {
			prelude = ""
		}
	}

	// What to run: -c, FILE, piped stdin, or a REPL.
	var cells []computer.PythonCell
	repl := false
	switch {
	case set["c"]:
		cells = []computer.PythonCell{{Code: *code}}
	case len(rest) == 1:
		var src []byte
		var err error
		if rest[0] == "-" {
			src, err = io.ReadAll(os.Stdin)
		} else {
			src, err = os.ReadFile(rest[0])
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "cubicle python: %v\n", err)
			return 2
		}
		if cells = splitCells(string(src)); len(cells) == 0 {
			return usageErr("%s has no code", rest[0])
		}
	case isTerminal(os.Stdin):
		repl = true
	default:
		src, err := io.ReadAll(os.Stdin)
		if err != nil {
			fmt.Fprintf(os.Stderr, "cubicle python: read stdin: %v\n", err)
			return 2
		}
		cells = []computer.PythonCell{{Code: string(src)}}
	}

	// Signals are caught for the whole command, so that the local computer
	// is always destroyed: a signal cancels what is running (in the REPL,
	// Ctrl-C interrupts the cell instead). SIGPIPE too: 'cubicle python |
	// head' must not die on a write and leave the computer running.
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
	defer signal.Stop(sigc)

	// Where to run it.
	var b pyBackend
	if *computerID != "" {
		b = remote
	} else {
		lb, status := newLocalPython(sigc, spec, *data, prelude)
		if lb == nil {
			return status
		}
		defer finish("python", lb.sb, *keep)
		b = lb
	}

	out := newRenderer(os.Stdout, os.Stderr, opts)
	if repl {
		return runREPL(b, opts, out, sigc)
	}
	return runCells(b, cells, opts, out, sigc)
}

// untilSignal is a context cancelled by the first signal on sigc (see
// caughtSignal); stop ends the watch.
func untilSignal(sigc <-chan os.Signal) (ctx context.Context, stop func()) {
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

// caughtSignal is the signal that cancelled ctx, or nil.
func caughtSignal(ctx context.Context) os.Signal {
	var se signalError
	if errors.As(context.Cause(ctx), &se) {
		return se.sig
	}
	return nil
}

// signalStatus is the exit status after a signal: 128+N.
func signalStatus(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return 128 + int(n)
	}
	return 130
}

// runCells runs one call and maps its end to the exit status.
func runCells(b pyBackend, cells []computer.PythonCell, opts pythonOpts, out *renderer, sigc <-chan os.Signal) int {
	ctx, stop := untilSignal(sigc)
	go func() {
		<-ctx.Done()
		if caughtSignal(ctx) == syscall.SIGPIPE {
			out.silence() // what the interrupted cell still says has no reader
		}
	}()
	res, err := b.run(ctx, computer.PythonRequest{Cells: cells, Timeout: opts.timeout, Reset: opts.reset}, out.output)
	stop()
	out.endLine()
	if sig := caughtSignal(ctx); sig != nil {
		if sig != syscall.SIGPIPE { // after SIGPIPE nobody reads: say nothing
			fmt.Fprintf(os.Stderr, "cubicle python: interrupted%s\n", b.interruptedNote())
		}
		return signalStatus(sig)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "cubicle python: %v\n", err)
		return 125
	}
	if opts.json {
		out.printJSON(res)
	}
	_, remote := b.(*remotePython)
	return summarize(res, opts.timeout, remote)
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
			msg = fmt.Sprintf("Command timed out after %d seconds", timeout)
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
		if c.Status == cellSkipped {
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

// splitCells cuts a file at '# %%' lines (the percent format of Jupytext,
// VS Code and Spyder). Code before the first marker is a cell of its own;
// sections with no code, and '# %% [markdown]' ones, are skipped.
func splitCells(src string) []computer.PythonCell {
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

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// pyBackend is where cells run: a local computer or a server's.
type pyBackend interface {
	// run makes one call; onOutput sees each output as it happens.
	run(ctx context.Context, req computer.PythonRequest, onOutput func(sandbox.PythonOutput)) (computer.PythonResult, error)
	// control interrupts or restarts the session kernel.
	control(ctx context.Context, action string) error
	// warm starts the session kernel ahead of the first input (best effort).
	warm(ctx context.Context)
	// describe names the computer for the REPL's banner.
	describe() string
	// interruptedNote completes "interrupted" (what happened to the computer).
	interruptedNote() string
}

// collectOutputs assembles the cells of a result from the streamed outputs,
// as the service does for its JSON answer.
type collectOutputs struct {
	mu    sync.Mutex
	cells [][]kernel.Output
}

func (c *collectOutputs) add(o sandbox.PythonOutput) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if o.Cell >= 0 && o.Cell < len(c.cells) {
		c.cells[o.Cell] = append(c.cells[o.Cell], o.Output)
	}
}

func (c *collectOutputs) get(i int) []kernel.Output {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i < 0 || i >= len(c.cells) || c.cells[i] == nil {
		return []kernel.Output{}
	}
	return c.cells[i]
}

// localPython is a fresh computer of this host, destroyed by the caller.
type localPython struct {
	sb        sandbox.Sandbox
	prelude   string
	maxOutput int64
}

func newLocalPython(sigc <-chan os.Signal, spec sandbox.Spec, data, prelude string) (*localPython, int) {
	ctx, stop := untilSignal(sigc)
	defer stop()
	drv, err := linux.New(linux.Config{StateDir: data})
	if err != nil {
		fmt.Fprintf(os.Stderr, "cubicle python: %v\n", err)
		return nil, 125
	}
	drv.GC(ctx) // computers of killed earlier runs
	sb, err := drv.Create(ctx, spec)
	if err != nil {
		if sig := caughtSignal(ctx); sig != nil {
			fmt.Fprintln(os.Stderr, "cubicle python: interrupted")
			return nil, signalStatus(sig)
		}
		fmt.Fprintf(os.Stderr, "cubicle python: %v\n", err)
		return nil, 125
	}
	return &localPython{sb: sb, prelude: prelude, maxOutput: int64(config.Default().Computers.MaxOutputBytes)}, 0
}

func (l *localPython) run(ctx context.Context, req computer.PythonRequest, onOutput func(sandbox.PythonOutput)) (computer.PythonResult, error) {
	col := &collectOutputs{cells: make([][]kernel.Output, len(req.Cells))}
	start := time.Now()
	res, err := l.sb.Python(ctx, sandbox.PythonRequest{Cells: computer.SandboxCells(req.Cells), Timeout: time.Duration(req.Timeout) * time.Second,
		Reset: req.Reset, Mode: "session", Prelude: l.prelude, MaxOutput: l.maxOutput},
		func(o sandbox.PythonOutput) {
			col.add(o)
			onOutput(o)
		})
	if err != nil {
		return computer.PythonResult{}, err
	}
	out := computer.PythonResult{Status: res.Status, Cells: make([]computer.CellView, len(req.Cells)), Cancelled: res.Cancelled,
		TimedOut: res.TimedOut, Message: res.Message, KernelRestarted: res.KernelRestarted, DurationMS: time.Since(start).Milliseconds()}
	for i, c := range req.Cells {
		out.Cells[i] = computer.CellView{Index: i, Title: c.Title, Outputs: col.get(i)}
	}
	for _, c := range res.Cells {
		if c.Index >= 0 && c.Index < len(out.Cells) {
			v := &out.Cells[c.Index]
			v.Status, v.ExecutionCount, v.InputRequested, v.Truncated = c.Status, c.ExecutionCount, c.InputRequested, c.Truncated
		}
	}
	if res.FailedCell >= 0 {
		fc := res.FailedCell
		out.FailedCell = &fc
	}
	return out, nil
}

func (l *localPython) control(ctx context.Context, action string) error {
	return l.sb.PythonControl(ctx, action)
}

func (l *localPython) warm(ctx context.Context) {
	l.sb.Python(ctx, sandbox.PythonRequest{Mode: "session", Prelude: l.prelude, Timeout: time.Minute}, nil)
}

func (l *localPython) describe() string { return "a fresh local computer, " + l.sb.ID() }

func (l *localPython) interruptedNote() string { return "; the computer was destroyed" }

// remotePython is a computer of a 'cubicle serve' server, over HTTP.
type remotePython struct {
	base, id, key string
	hc            *http.Client
}

// maxEvent bounds one server-sent event (an output with a large PNG).
const maxEvent = 256 << 20

// serverError is the API's error body.
type serverError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (r *remotePython) post(ctx context.Context, path string, body []byte, accept string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.base+"/v1/computers/"+url.PathEscape(r.id)+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+r.key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	res, err := r.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("server %s: %w", r.base, unwrapURLError(err))
	}
	return res, nil
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// statusError explains a non-success answer of the server.
func statusError(res *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	var e serverError
	if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
		return fmt.Errorf("server: %s (%s, HTTP %d)", e.Error.Message, e.Error.Code, res.StatusCode)
	}
	return fmt.Errorf("server: HTTP %s: %s", res.Status, strings.TrimSpace(string(b)))
}

func (r *remotePython) run(ctx context.Context, req computer.PythonRequest, onOutput func(sandbox.PythonOutput)) (computer.PythonResult, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return computer.PythonResult{}, err
	}
	res, err := r.post(ctx, "/python", body, "text/event-stream")
	if err != nil {
		return computer.PythonResult{}, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return computer.PythonResult{}, statusError(res)
	}
	col := &collectOutputs{cells: make([][]kernel.Output, len(req.Cells))}
	finish := func(out computer.PythonResult) computer.PythonResult {
		for i := range out.Cells {
			if out.Cells[i].Outputs == nil {
				out.Cells[i].Outputs = col.get(out.Cells[i].Index)
			}
		}
		return out
	}
	if !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		var out computer.PythonResult // a server that answered with plain JSON
		if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
			return out, fmt.Errorf("server: bad answer: %w", err)
		}
		for _, c := range out.Cells {
			for _, o := range c.Outputs {
				onOutput(sandbox.PythonOutput{Cell: c.Index, Output: o})
			}
		}
		return out, nil
	}
	var result *computer.PythonResult
	err = readSSE(res.Body, func(event string, data []byte) error {
		switch event {
		case "output":
			var o sandbox.PythonOutput
			if err := json.Unmarshal(data, &o); err != nil {
				return fmt.Errorf("server: bad output event: %w", err)
			}
			col.add(o)
			onOutput(o)
		case "result":
			var out computer.PythonResult
			if err := json.Unmarshal(data, &out); err != nil {
				return fmt.Errorf("server: bad result event: %w", err)
			}
			out = finish(out)
			result = &out
			return io.EOF
		case "error":
			var e serverError
			if json.Unmarshal(data, &e) != nil || e.Error.Message == "" {
				return fmt.Errorf("server: error event %s", data)
			}
			return fmt.Errorf("server: %s (%s)", e.Error.Message, e.Error.Code)
		}
		return nil
	})
	if result != nil {
		return *result, nil
	}
	if ctx.Err() != nil {
		return computer.PythonResult{}, ctx.Err()
	}
	if err == nil || errors.Is(err, io.ErrUnexpectedEOF) {
		err = errors.New("server: the answer ended without a result")
	}
	return computer.PythonResult{}, err
}

// readSSE calls fn for each event of a text/event-stream until fn returns
// an error (io.EOF: done) or the stream ends.
func readSSE(r io.Reader, fn func(event string, data []byte) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	event := ""
	var data []byte
	for {
		line, err := readLine(br, maxEvent-len(data))
		if err != nil {
			if err == io.EOF {
				return io.ErrUnexpectedEOF
			}
			return err
		}
		switch {
		case len(line) == 0:
			if event != "" || data != nil {
				if err := fn(cmpOr(event, "message"), data); err != nil {
					if err == io.EOF {
						return nil
					}
					return err
				}
			}
			event, data = "", nil
		case line[0] == ':': // comment, keep-alive
		default:
			field, value, _ := bytes.Cut(line, []byte(":"))
			value = bytes.TrimPrefix(value, []byte(" "))
			switch string(field) {
			case "event":
				event = string(value)
			case "data":
				if data != nil {
					data = append(data, '\n')
				} else {
					data = []byte{}
				}
				data = append(data, value...)
			}
		}
	}
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// readLine reads one line without its end (\n or \r\n), at most limit bytes.
func readLine(br *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > limit {
			return nil, errors.New("server: an event is larger than this client accepts")
		}
		switch {
		case err == nil:
			line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF && len(line) > 0:
			return nil, io.ErrUnexpectedEOF
		default:
			return nil, err
		}
	}
}

func (r *remotePython) control(ctx context.Context, action string) error {
	res, err := r.post(ctx, "/python/"+action, nil, "application/json")
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusNoContent && res.StatusCode != http.StatusOK {
		return statusError(res)
	}
	return nil
}

func (r *remotePython) warm(context.Context) {} // the server's pool warms kernels

func (r *remotePython) describe() string { return "computer " + r.id + " at " + r.base }

func (r *remotePython) interruptedNote() string { return "" }

// renderer prints outputs for a terminal (or a pipe) as they arrive.
type renderer struct {
	mu        sync.Mutex
	stdout    io.Writer
	stderr    io.Writer
	json      bool
	proto     termimage.Protocol
	saveDir   string
	next      int  // next image number to try
	midLine   bool // stdout does not end with a newline
	midLineEr bool // stderr does not end with a newline
	promptErr bool // the REPL prompts on stderr: stdout is not a terminal
	silent    bool // print no more outputs
}

// silence drops the outputs still to come.
func (r *renderer) silence() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.silent = true
}

func newRenderer(stdout, stderr *os.File, opts pythonOpts) *renderer {
	tty := isTerminal(stdout)
	return &renderer{stdout: stdout, stderr: stderr, json: opts.json, saveDir: opts.saveDir, next: 1,
		proto: termimage.Detect(os.Getenv, tty), promptErr: !tty}
}

func (r *renderer) write(toErr bool, s string) {
	if s == "" {
		return
	}
	if toErr {
		io.WriteString(r.stderr, s)
		r.midLineEr = !strings.HasSuffix(s, "\n")
		return
	}
	io.WriteString(r.stdout, s)
	r.midLine = !strings.HasSuffix(s, "\n")
}

// block writes s on lines of its own.
func (r *renderer) block(toErr bool, s string) {
	if toErr && r.midLineEr || !toErr && r.midLine {
		r.write(toErr, "\n")
	}
	if !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	r.write(toErr, s)
}

// endLine ends a last line of output that had no newline.
func (r *renderer) endLine() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.midLine {
		r.write(false, "\n")
	}
	if r.midLineEr {
		r.write(true, "\n")
	}
}

// output prints one streamed output.
func (r *renderer) output(po sandbox.PythonOutput) {
	if r.json {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.silent {
		return
	}
	o := po.Output
	switch o.Type {
	case kernel.OutStream:
		r.write(o.Name == "stderr", o.Text)
	case kernel.OutDisplay, kernel.OutResult, kernel.OutUpdate:
		switch {
		case o.PNG != nil:
			r.image(o)
		case o.Text != "":
			r.block(false, o.Text)
		case o.JSON != nil:
			r.block(false, string(o.JSON))
		}
	case kernel.OutError:
		// IPython's traceback ends with "ename: evalue"; say it if not.
		tb := strings.TrimRight(strings.Join(o.Traceback, "\n"), "\n")
		head := o.EName
		if o.EValue != "" {
			head += ": " + o.EValue
		}
		if !strings.Contains(tb, head) {
			tb = strings.TrimLeft(tb+"\n"+head, "\n")
		}
		r.block(true, tb)
	case kernel.OutInput:
		r.block(true, fmt.Sprintf("[input(%q) is not available here: it got end of file]", o.Text))
	case kernel.OutTruncated:
		r.block(true, o.Text)
	case kernel.OutClear: // a terminal cannot take back what it printed
	}
}

// image shows a PNG inline or saves it with a note.
func (r *renderer) image(o kernel.Output) {
	if r.proto != termimage.None {
		if r.midLine {
			r.write(false, "\n")
		}
		if termimage.Write(r.stdout, r.proto, o.PNG) == nil {
			r.midLine = false
			return
		}
	}
	path, err := r.save(o.PNG)
	if err != nil {
		r.block(true, fmt.Sprintf("[image (%dx%d) not saved: %v]", o.Width, o.Height, err))
		return
	}
	w, h := o.Width, o.Height
	if w == 0 || h == 0 {
		if cfg, _, err := image.DecodeConfig(bytes.NewReader(o.PNG)); err == nil {
			w, h = cfg.Width, cfg.Height
		}
	}
	r.block(false, fmt.Sprintf("[image saved to %s (%dx%d)]", path, w, h))
}

// save writes png to the first free cubicle-out-<n>.png of the save
// directory; it never overwrites a file.
func (r *renderer) save(png []byte) (string, error) {
	dir := r.saveDir
	if dir == "" {
		dir = "."
	}
	for ; ; r.next++ {
		name := fmt.Sprintf("cubicle-out-%d.png", r.next)
		path := filepath.Join(dir, name)
		if dir == "." {
			path = "./" + name
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		r.next++
		_, err = f.Write(png)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(path)
			return "", err
		}
		return path, nil
	}
}

// printJSON prints a result as one line of JSON.
func (r *renderer) printJSON(res computer.PythonResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	enc := json.NewEncoder(r.stdout)
	enc.SetEscapeHTML(false)
	enc.Encode(res)
}
