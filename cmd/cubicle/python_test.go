package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/client"
)

// pyRun says how to start 'cubicle python' in a test.
type pyRun struct {
	dir   string   // working directory ("": the test's)
	env   []string // extra environment (CUBICLE_* of the caller are removed)
	stdin string
}

// pythonCLI runs the binary like cli, with a working directory, an
// environment without the caller's CUBICLE_ variables, and stdin.
func pythonCLI(t *testing.T, o pyRun, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command(cubicleBin, args...)
	cmd.Dir = o.dir
	cmd.Env = append(cleanEnv(), o.env...)
	cmd.Stdin = strings.NewReader(o.stdin)
	return runCommand(t, cmd, args)
}

func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CUBICLE_") && !strings.HasPrefix(kv, "TERM") && !strings.HasPrefix(kv, "KITTY_") {
			env = append(env, kv)
		}
	}
	return env
}

// py runs 'cubicle python --data dir ARGS' in a fresh local computer.
func py(t *testing.T, dir string, args ...string) cliResult {
	t.Helper()
	return pythonCLI(t, pyRun{}, append([]string{"python", "--data", dir}, args...)...)
}

func TestPythonCode(t *testing.T) {
	dir := dataDir(t)
	r := py(t, dir, "-c", "print(6*7)")
	if r.code != 0 || r.stdout != "42\n" || r.stderr != "" {
		t.Fatalf("print(6*7): code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	t.Logf("print(6*7) in a fresh computer took %v", r.took)
	// The value of the last expression is printed; stderr goes to stderr.
	r = py(t, dir, "--no-prelude", "-c", "import sys\nprint('out'); print('err', file=sys.stderr)\n6*7")
	if r.code != 0 || r.stdout != "out\n42\n" || r.stderr != "err\n" {
		t.Errorf("result and streams: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	// The prelude's names are there by default.
	r = py(t, dir, "-c", "print(np.arange(3).sum(), pd.__name__, plt.__name__)")
	if r.code != 0 || r.stdout != "3 pandas matplotlib.pyplot\n" {
		t.Errorf("prelude: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

func TestPythonFailingCell(t *testing.T) {
	dir := dataDir(t)
	r := py(t, dir, "-c", "print('before')\n1/0\nprint('after')")
	if r.code != 1 || r.stdout != "before\n" {
		t.Errorf("1/0: code %d, stdout %q, want 1 and only 'before'", r.code, r.stdout)
	}
	for _, want := range []string{"ZeroDivisionError: division by zero", "----> 2 1/0", "cubicle python:"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("1/0: stderr %q does not contain %q", r.stderr, want)
		}
	}
	if strings.Contains(r.stderr, "\x1b[") {
		t.Errorf("the traceback has ANSI colours: %q", r.stderr)
	}
	// In a file, the failing cell is named and the later ones do not run.
	file := filepath.Join(t.TempDir(), "cells.py")
	os.WriteFile(file, []byte("# %% one\nprint('one')\n# %% load data\nraise ValueError('bad row')\n# %% three\nprint('three')\n"), 0o644)
	r = py(t, dir, file)
	if r.code != 1 || r.stdout != "one\n" || strings.Contains(r.stdout, "three") {
		t.Errorf("failing cell 2 of 3: code %d, stdout %q", r.code, r.stdout)
	}
	if !strings.Contains(r.stderr, "ValueError: bad row") || !strings.Contains(r.stderr, "load data") {
		t.Errorf("failing cell 2 of 3: stderr %q does not name the cell and the error", r.stderr)
	}
}

func TestPythonTimeout(t *testing.T) {
	dir := dataDir(t)
	r := py(t, dir, "--timeout", "2", "-c", "import time; time.sleep(10); print('never')")
	if r.code != 124 || !strings.Contains(r.stderr, "Command timed out after 2 seconds") || strings.Contains(r.stdout, "never") {
		t.Errorf("timeout: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	// No bound on r.took: "never" not printed already proves the cell was
	// stopped before its sleep ended (a timed assertion fails under load).
}

func TestPythonFileCells(t *testing.T) {
	dir := dataDir(t)
	file := filepath.Join(t.TempDir(), "analysis.py")
	src := "import math\n\n# %% setup\nx = 20\n\n# %% [markdown]\n# This section is prose.\n\n# %% use the state of the cell before\nprint(x + 22, math.floor(1.5))\n"
	os.WriteFile(file, []byte(src), 0o644)
	r := py(t, dir, "--json", file)
	if r.code != 0 {
		t.Fatalf("file: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	var res client.PythonResult // the REST body, as --json prints it
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("--json printed %q: %v", r.stdout, err)
	}
	if len(res.Cells) != 3 || res.Cells[1].Title != "setup" || res.Cells[2].Title != "use the state of the cell before" {
		t.Fatalf("cells %+v, want 3 with the titles after '# %%%%'", res.Cells)
	}
	if out := res.Cells[2].Outputs; len(out) != 1 || out[0].Text != "42 1\n" {
		t.Errorf("cell 3 outputs %+v, want 42 1", out)
	}
	// Without --json: just the output.
	r = py(t, dir, file)
	if r.code != 0 || r.stdout != "42 1\n" {
		t.Errorf("file: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

var savedRe = regexp.MustCompile(`\[image saved to (\S+) \((\d+)x(\d+)\)\]`)

func TestPythonPlotSaved(t *testing.T) {
	dir := dataDir(t)
	cwd := t.TempDir()
	os.WriteFile(filepath.Join(cwd, "cubicle-out-1.png"), []byte("not mine"), 0o644)
	// A figure shown and also the last expression: one image (de-duplicated).
	code := "fig, ax = plt.subplots(figsize=(4, 3))\nax.plot([1, 3, 2])\nprint('plotted')\nplt.show()\nfig"
	r := pythonCLI(t, pyRun{dir: cwd, env: []string{"TERM=xterm-kitty"}}, "python", "--data", dir, "-c", code)
	if r.code != 0 {
		t.Fatalf("plot: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	m := savedRe.FindAllStringSubmatch(r.stdout, -1)
	if len(m) != 1 || !strings.HasPrefix(r.stdout, "plotted\n") {
		t.Fatalf("plot: stdout %q, want 'plotted' and one note (no kitty sequences: stdout is not a terminal)", r.stdout)
	}
	if m[0][1] != "./cubicle-out-2.png" {
		t.Errorf("saved to %s, want ./cubicle-out-2.png (1 exists and is not overwritten)", m[0][1])
	}
	if b, _ := os.ReadFile(filepath.Join(cwd, "cubicle-out-1.png")); string(b) != "not mine" {
		t.Errorf("an existing file was overwritten")
	}
	f, err := os.Open(filepath.Join(cwd, "cubicle-out-2.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, format, err := image.DecodeConfig(f)
	if err != nil || format != "png" || fmt.Sprintf("%dx%d", cfg.Width, cfg.Height) != m[0][2]+"x"+m[0][3] || cfg.Width < 100 {
		t.Errorf("saved image: %s %dx%d, %v; the note says %sx%s", format, cfg.Width, cfg.Height, err, m[0][2], m[0][3])
	}
	// --save-dir.
	out := filepath.Join(t.TempDir(), "figs")
	os.Mkdir(out, 0o755)
	r = py(t, dir, "--save-dir", out, "-c", "plt.plot([1, 2]); plt.show()")
	if m := savedRe.FindStringSubmatch(r.stdout); r.code != 0 || m == nil || m[1] != filepath.Join(out, "cubicle-out-1.png") {
		t.Errorf("--save-dir: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

func TestPythonJSON(t *testing.T) {
	dir := dataDir(t)
	r := py(t, dir, "--json", "-c", "print(1)\nplt.plot([1, 2]); plt.show()\n2+2")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("--json: code %d, stderr %q", r.code, r.stderr)
	}
	if strings.Count(r.stdout, "\n") != 1 {
		t.Errorf("--json printed more than one line: %q", r.stdout)
	}
	var res client.PythonResult // the REST body, as --json prints it
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("--json printed %q: %v", r.stdout, err)
	}
	if res.Status != "ok" || len(res.Cells) != 1 || res.Cells[0].Status != "ok" || res.TimedOut || res.FailedCell != nil {
		t.Fatalf("--json result: %s", r.stdout)
	}
	var kinds []string
	for _, o := range res.Cells[0].Outputs {
		switch o.Type {
		case client.OutStream:
			kinds = append(kinds, "stream:"+o.Text)
		case client.OutResult:
			kinds = append(kinds, "result:"+o.Text)
		case client.OutDisplay:
			if _, _, err := image.DecodeConfig(bytes.NewReader(o.PNG)); err != nil {
				t.Errorf("the display's PNG does not decode: %v", err)
			}
			kinds = append(kinds, "png")
		}
	}
	if strings.Join(kinds, ",") != "stream:1\n,png,result:4" {
		t.Errorf("outputs %q", kinds)
	}
	if _, err := os.Stat("cubicle-out-1.png"); err == nil {
		t.Errorf("--json saved an image file")
	}
	// A failure is still JSON on stdout, and exit 1.
	r = py(t, dir, "--json", "--no-prelude", "-c", "1/0")
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || r.code != 1 || res.FailedCell == nil || *res.FailedCell != 0 {
		t.Errorf("--json failure: code %d, stdout %q, %v", r.code, r.stdout, err)
	}
}

func TestPythonStdin(t *testing.T) {
	dir := dataDir(t)
	r := pythonCLI(t, pyRun{stdin: "print(1)\nfor i in range(2):\n    print(i + 10)\n"}, "python", "--data", dir, "--no-prelude")
	if r.code != 0 || r.stdout != "1\n10\n11\n" {
		t.Errorf("stdin: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	// FILE '-' is stdin too, split into cells.
	r = pythonCLI(t, pyRun{stdin: "# %% a\nv = 2\n# %% b\nprint(v * 21)\n"}, "python", "--data", dir, "--no-prelude", "-")
	if r.code != 0 || r.stdout != "42\n" {
		t.Errorf("FILE -: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// TestPythonBrokenPipe: a reader that goes away ('| head -1') ends the
// call quietly and the computer is still destroyed (dataDir checks).
func TestPythonBrokenPipe(t *testing.T) {
	dir := dataDir(t)
	cmd := exec.Command(cubicleBin, "python", "--data", dir, "--no-prelude", "-c",
		"import time\nfor i in range(600):\n    print(i, flush=True); time.sleep(0.05)")
	cmd.Env = cleanEnv()
	var errb bytes.Buffer
	cmd.Stderr = &errb
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line := make([]byte, 2)
	if _, err := io.ReadFull(stdout, line); err != nil || string(line) != "0\n" {
		t.Fatalf("first line %q, %v (stderr %q)", line, err, errb.String())
	}
	stdout.Close()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("cubicle python went on for a minute after its reader left")
	}
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 141 || errb.Len() != 0 {
		t.Errorf("after the reader left: %v, stderr %q; want exit 141 and nothing said", err, errb.String())
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("ending took %v", took)
	}
}

// ptySession drives 'cubicle python' in a pseudo-terminal made by script(1).
type ptySession struct {
	t     *testing.T
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *lockedBuffer
	done  chan struct{}
	err   error
	mark  int // output before this offset has been matched
	typed []string
}

func startPTY(t *testing.T, o pyRun, command string) *ptySession {
	t.Helper()
	p := &ptySession{t: t, out: &lockedBuffer{}, done: make(chan struct{})}
	// exec: script(1) runs $SHELL -c, and a shell left waiting (dash does
	// not exec the last command) would catch the test's Ctrl-C itself and
	// exit 130.
	p.cmd = exec.Command("script", "-qefc", "exec "+command, "/dev/null")
	p.cmd.Dir = o.dir
	p.cmd.Env = append(append(cleanEnv(), "TERM=xterm"), o.env...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	var err error
	if p.in, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

func (p *ptySession) typeText(s string) {
	p.t.Helper()
	p.typed = append(p.typed, s)
	if _, err := io.WriteString(p.in, s); err != nil {
		p.t.Fatalf("type %q: %v", s, err)
	}
}

// expect waits until the output after the last match matches re, and
// moves past the match.
func (p *ptySession) expect(re string, within time.Duration) []string {
	p.t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(within)
	for {
		s := p.out.String()
		if loc := rx.FindStringSubmatchIndex(s[p.mark:]); loc != nil {
			var m []string
			for i := 0; i+1 < len(loc); i += 2 {
				if loc[i] >= 0 {
					m = append(m, s[p.mark+loc[i]:p.mark+loc[i+1]])
				}
			}
			p.mark += loc[1]
			return m
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("no %q within %v after typing %q; output after the last match:\n%s", re, within, p.typed, s[p.mark:])
		}
		select {
		case <-p.done:
			if !rx.MatchString(p.out.String()[p.mark:]) {
				p.t.Fatalf("the REPL ended (%v) before %q; output after the last match:\n%s", p.err, re, p.out.String()[p.mark:])
			}
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestPythonREPL types into the REPL through a pseudo-terminal: state
// persists between inputs, a block continues until an empty line, Ctrl-C
// interrupts a running cell and keeps the state, Ctrl-D exits 0 and the
// local computer is destroyed (dataDir checks).
func TestPythonREPL(t *testing.T) {
	dir := dataDir(t)
	p := startPTY(t, pyRun{}, cubicleBin+" python --no-prelude --data "+dir)
	p.expect(`Python in a fresh local computer, \S+\. Ctrl-C interrupts, Ctrl-D exits\.\r\n>>> `, 30*time.Second)
	p.typeText("x = 5\n")
	p.expect(`x = 5\r\n>>> `, 30*time.Second)
	p.typeText("x * 2\n")
	p.expect(`x \* 2\r\n10\r\n>>> `, 10*time.Second)
	p.typeText("def f():\n")
	p.expect(`\r\n\.\.\. `, 5*time.Second)
	p.typeText("    return 7\n")
	p.expect(`\r\n\.\.\. `, 5*time.Second)
	p.typeText("\n")
	p.expect(`\r\n>>> `, 10*time.Second)
	p.typeText("f()\n")
	p.expect(`f\(\)\r\n7\r\n>>> `, 10*time.Second)
	// Open brackets continue too, without a blank line.
	p.typeText("[f(),\n")
	p.expect(`\r\n\.\.\. `, 5*time.Second)
	p.typeText(" x]\n")
	p.expect(`\r\n\[7, 5\]\r\n>>> `, 10*time.Second)
	// Ctrl-C interrupts a running cell; the state survives.
	p.typeText("import time; print('sleeping', flush=True); time.sleep(60)\n")
	p.expect(`\r\nsleeping\r\n`, 10*time.Second)
	start := time.Now()
	p.typeText("\x03")
	p.expect(`KeyboardInterrupt[^\n]*\r\n(.|\r\n)*>>> `, 10*time.Second)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Ctrl-C took %v to stop the cell", took)
	}
	p.typeText("x + 1\n")
	p.expect(`x \+ 1\r\n6\r\n>>> `, 10*time.Second)
	// Ctrl-C at the prompt discards the input being typed.
	p.typeText("if True:\n")
	p.expect(`\r\n\.\.\. `, 5*time.Second)
	p.typeText("\x03")
	p.expect(`KeyboardInterrupt\r\n>>> `, 5*time.Second)
	// A failing input shows its traceback and the REPL goes on.
	p.typeText("1/0\n")
	p.expect(`ZeroDivisionError: division by zero\r\n>>> `, 10*time.Second)
	p.typeText("\x04")
	defer func() {
		if t.Failed() {
			t.Logf("the terminal:\n%s", p.out.String())
		}
	}()
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("Ctrl-D did not end the REPL within 30 s:\n%s", p.out.String()[p.mark:])
	}
	if p.err != nil {
		t.Fatalf("the REPL ended with %v after Ctrl-D:\n%s", p.err, p.out.String()[p.mark:])
	}
}

// wait waits for the session's end and returns its exit status.
func (p *ptySession) wait(within time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(within):
		p.t.Fatalf("did not end within %v:\n%s", within, p.out.String())
	}
	if ee, ok := p.err.(*exec.ExitError); ok {
		return ee.ExitCode()
	} else if p.err != nil {
		p.t.Fatal(p.err)
	}
	return 0
}

// TestPythonPlotInline: with stdout a kitty or WezTerm terminal, a figure is
// shown with the terminal's image protocol and no file is written.
func TestPythonPlotInline(t *testing.T) {
	dir := dataDir(t)
	code := `'import matplotlib.pyplot as plt; plt.plot([1, 2]); plt.show(); print("after")'`
	for _, c := range []struct {
		env  string
		want string
	}{
		{"TERM=xterm-kitty", "\x1b_Gf=100,a=T,q=2,m=1;iVBORw0KGgo"},
		{"TERM_PROGRAM=WezTerm", "\x1b]1337;File=inline=1;size="},
	} {
		cwd := t.TempDir()
		p := startPTY(t, pyRun{dir: cwd, env: []string{c.env}}, cubicleBin+" python --no-prelude --data "+dir+" -c "+code)
		if code := p.wait(time.Minute); code != 0 {
			t.Fatalf("%s: exit %d:\n%q", c.env, code, p.out.String())
		}
		out := p.out.String()
		if !strings.Contains(out, c.want) || !strings.Contains(out, "\r\nafter\r\n") {
			t.Errorf("%s: the terminal got %.300q, want %q and 'after' on a line of its own", c.env, out, c.want)
		}
		if ents, _ := os.ReadDir(cwd); len(ents) != 0 || strings.Contains(out, "image saved") {
			t.Errorf("%s: an image was saved (%d files)", c.env, len(ents))
		}
	}
}

// TestPythonRemote runs cells in a computer of a real server over HTTP,
// with the key from CUBICLE_KEY.
func TestPythonRemote(t *testing.T) {
	dir := t.TempDir()
	gcAfter(t, dir)
	s := startServer(t, dir, serveEnv("CUBICLE_ADMIN_KEY="+serveAdminKey))
	defer s.stop()
	var c struct {
		ID string `json:"id"`
	}
	s.decode("POST", "/v1/computers", "", 201, &c)
	env := []string{"CUBICLE_KEY=" + serveAdminKey, "CUBICLE_URL=" + s.url}
	cwd := t.TempDir()
	remote := func(args ...string) cliResult {
		t.Helper()
		return pythonCLI(t, pyRun{dir: cwd, env: env}, append([]string{"python", "--computer", c.ID}, args...)...)
	}
	r := remote("-c", "y = 21\nprint('set')")
	if r.code != 0 || r.stdout != "set\n" {
		t.Fatalf("remote: code %d, stdout %q, stderr %q\nserver log:\n%s", r.code, r.stdout, r.stderr, s.stderr)
	}
	r = remote("-c", "import sys\nprint(y * 2)\nprint('e', file=sys.stderr)\nplt.plot([1, 2]); plt.show()")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "42\n") || r.stderr != "e\n" {
		t.Errorf("state across calls: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if m := savedRe.FindStringSubmatch(r.stdout); m == nil {
		t.Errorf("no image note: %q", r.stdout)
	} else if b, err := os.ReadFile(filepath.Join(cwd, m[1])); err != nil {
		t.Errorf("saved image: %v", err)
	} else if _, _, err := image.DecodeConfig(bytes.NewReader(b)); err != nil {
		t.Errorf("saved image does not decode: %v", err)
	}
	r = remote("--json", "-c", "print(y)")
	var res client.PythonResult // the REST body, as --json prints it
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || r.code != 0 || len(res.Cells) != 1 ||
		len(res.Cells[0].Outputs) != 1 || res.Cells[0].Outputs[0].Text != "21\n" {
		t.Errorf("remote --json: code %d, stdout %q, %v", r.code, r.stdout, err)
	}
	r = remote("-c", "1/0")
	if r.code != 1 || !strings.Contains(r.stderr, "ZeroDivisionError") {
		t.Errorf("remote failure: code %d, stderr %q", r.code, r.stderr)
	}
	r = remote("--timeout", "2", "-c", "import time; time.sleep(20)")
	if r.code != 124 || !strings.Contains(r.stderr, "Command timed out after 2 seconds") {
		t.Errorf("remote timeout: code %d, stderr %q", r.code, r.stderr)
	}
	r = remote("-c", "print(y)")
	if r.code != 0 || r.stdout != "21\n" {
		t.Errorf("after the timeout: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	// Errors of the server are one line, exit 125.
	r = pythonCLI(t, pyRun{env: env}, "python", "--computer", "cmp_nosuchcomputer", "-c", "1")
	if r.code != 125 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "404") {
		t.Errorf("unknown computer: code %d, stderr %q", r.code, r.stderr)
	}
	r = pythonCLI(t, pyRun{env: []string{"CUBICLE_KEY=cub_wrong", "CUBICLE_URL=" + s.url}}, "python", "--computer", c.ID, "-c", "1")
	if r.code != 125 || !strings.Contains(r.stderr, "401") {
		t.Errorf("wrong key: code %d, stderr %q", r.code, r.stderr)
	}
}

func TestPythonBadUsage(t *testing.T) {
	cases := []struct {
		args  []string
		names []string
	}{
		{[]string{"--timeout", "0"}, []string{"timeout"}},
		{[]string{"--timeout", "11m"}, []string{"timeout"}},
		{[]string{"--timeout", "soon"}, []string{"timeout", "soon"}},
		{[]string{"-c", "1", "file.py"}, []string{"-c", "FILE"}},
		{[]string{"a.py", "b.py"}, []string{"FILE"}},
		{[]string{"/no/such/file.py"}, []string{"/no/such/file.py"}},
		{[]string{"--memory", "1M", "-c", "1"}, []string{"memory"}},
		{[]string{"--url", "http://127.0.0.1:1", "-c", "1"}, []string{"--url", "--computer"}},
		{[]string{"--computer", "cmp_x", "-c", "1"}, []string{"CUBICLE_KEY"}},
		{[]string{"--computer", "cmp_x", "--memory", "1G", "-c", "1"}, []string{"memory", "--computer"}},
		{[]string{"--no-such-flag"}, []string{"no-such-flag"}},
	}
	for _, c := range cases { // all refused before a computer is created
		r := pythonCLI(t, pyRun{}, append([]string{"python"}, c.args...)...)
		oneLine(t, r, "python "+strings.Join(c.args, " "), c.names...)
	}
	r := pythonCLI(t, pyRun{}, "python", "--help")
	if r.code != 0 || !strings.Contains(r.stdout, "Example") || r.stderr != "" {
		t.Errorf("--help: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"-computer", "-url", "-timeout", "-json", "-save-dir", "-data", "-memory", "CUBICLE_KEY", "CUBICLE_URL", "124", "standard error"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("python --help does not mention %s", want)
		}
	}
	if r := cli(t, "--help"); !strings.Contains(r.stdout, "python") {
		t.Errorf("cubicle --help does not list python: %q", r.stdout)
	}
}
