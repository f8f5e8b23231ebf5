package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/testbin"
)

// cubicleBin is the real binary, built once without cgo as in production.
var cubicleBin string

func TestMain(m *testing.M) {
	os.Exit(testbin.Main(m, &cubicleBin))
}

type cliResult struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

// cli runs the binary with args and returns its exit code and output. It
// fails the test if the binary does not end within a minute.
func cli(t *testing.T, args ...string) cliResult {
	t.Helper()
	return runCommand(t, exec.Command(cubicleBin, args...), args)
}

// runCommand runs a prepared cubicle command (see cli) with bounded time.
func runCommand(t *testing.T, cmd *exec.Cmd, args []string) cliResult {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("cubicle %q did not finish within a minute\nstdout: %s\nstderr: %s", args, out.String(), errb.String())
	}
	r := cliResult{stdout: out.String(), stderr: errb.String(), took: time.Since(start)}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("cubicle %q: %v", args, err)
	}
	return r
}

// runIn runs 'cubicle run --data dir' with extra arguments.
func runIn(t *testing.T, dir string, args ...string) cliResult {
	t.Helper()
	return cli(t, append([]string{"run", "--data", dir}, args...)...)
}

// dataDir is a state directory whose computers are all gone at the end.
func dataDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Cleanup(func() {
		// Whatever a failing test kept must not stay mounted.
		exec.Command(cubicleBin, "gc", "--kept", "--data", dir).Run()
		entries, _ := os.ReadDir(filepath.Join(dir, "computers"))
		for _, e := range entries {
			t.Errorf("computer %s left behind in the state directory", e.Name())
		}
	})
	return dir
}

func TestRunExitStatusAndStreams(t *testing.T) {
	dir := dataDir(t)
	r := runIn(t, dir, "--", "sh", "-c", "echo out; echo err >&2; exit 7")
	if r.code != 7 || r.stdout != "out\n" || r.stderr != "err\n" {
		t.Errorf("exit 7: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runIn(t, dir, "--", "true")
	if r.code != 0 || r.stdout != "" || r.stderr != "" {
		t.Errorf("true: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runIn(t, dir, "--", "sh", "-c", "kill -KILL $$")
	if r.code != 137 {
		t.Errorf("kill -KILL $$: code %d, want 137 (stderr %q)", r.code, r.stderr)
	}
	r = runIn(t, dir, "--", "sh", "-c", "kill -TERM $$")
	if r.code != 143 {
		t.Errorf("kill -TERM $$: code %d, want 143 (stderr %q)", r.code, r.stderr)
	}
	r = runIn(t, dir, "--", "no-such-command-xyz")
	if r.code != 127 || !strings.Contains(r.stderr, "no-such-command-xyz") {
		t.Errorf("missing command: code %d, stderr %q; want 127 naming it", r.code, r.stderr)
	}
	r = runIn(t, dir, "--", "/etc/passwd")
	if r.code != 126 {
		t.Errorf("non-executable command: code %d, stderr %q; want 126", r.code, r.stderr)
	}
	r = runIn(t, dir, "--env", "A=1", "--env", "B=two words", "--", "sh", "-c", `echo "$A"; echo "$B"`)
	if r.code != 0 || r.stdout != "1\ntwo words\n" {
		t.Errorf("--env: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	// Arguments reach the command unchanged, shell metacharacters included.
	r = runIn(t, dir, "--", "printf", "%s|", "a b", "$HOME", "'q'", "")
	if r.code != 0 || r.stdout != "a b|$HOME|'q'||" {
		t.Errorf("argv: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

func TestRunLimits(t *testing.T) {
	dir := dataDir(t)
	r := runIn(t, dir, "--memory", "64M", "--", "/usr/bin/python3", "-c", "a=bytearray(1<<30)")
	if r.code != 137 || !strings.Contains(r.stderr, "out of memory") {
		t.Errorf("OOM: code %d, stderr %q; want 137 and 'out of memory'", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "64M") {
		t.Errorf("OOM message does not name the limit: %q", r.stderr)
	}
	r = runIn(t, dir, "--timeout", "1s", "--", "sleep", "10")
	if r.code != 124 || !strings.Contains(r.stderr, "timed out after 1 seconds") {
		t.Errorf("timeout: code %d, stderr %q", r.code, r.stderr)
	}
	if r.took > 8*time.Second {
		t.Errorf("a 1 s timeout took %v", r.took)
	}
	r = runIn(t, dir, "--timeout", "2", "--", "sh", "-c", "sleep 10 & sleep 10; echo never")
	if r.code != 124 || strings.Contains(r.stdout, "never") || !strings.Contains(r.stderr, "timed out after 2 seconds") {
		t.Errorf("timeout in whole seconds: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runIn(t, dir, "--pids", "16", "--", "sh", "-c", "for i in $(seq 40); do sleep 1 & done; wait; echo finished")
	if !strings.Contains(strings.ToLower(r.stderr), "fork") || strings.Contains(r.stdout, "finished") {
		t.Errorf("40 processes under --pids 16: code %d, stdout %q, stderr %q; the limit was not enforced", r.code, r.stdout, r.stderr)
	}
}

// oneLine checks that an error went to stderr as exactly one line that
// names what was wrong.
func oneLine(t *testing.T, r cliResult, what string, names ...string) {
	t.Helper()
	if r.code != 2 {
		t.Errorf("%s: exit %d, want 2 (stderr %q)", what, r.code, r.stderr)
	}
	if strings.Count(r.stderr, "\n") != 1 || !strings.HasSuffix(r.stderr, "\n") {
		t.Errorf("%s: stderr is not exactly one line: %q", what, r.stderr)
	}
	for _, n := range names {
		if !strings.Contains(r.stderr, n) {
			t.Errorf("%s: stderr %q does not name %q", what, r.stderr, n)
		}
	}
	if r.stdout != "" {
		t.Errorf("%s: stdout %q, want nothing", what, r.stdout)
	}
}

func TestRunBadFlags(t *testing.T) {
	dir := dataDir(t)
	cases := []struct {
		args  []string
		names []string
	}{
		{[]string{"--memory", "lots"}, []string{"memory", "lots"}},
		{[]string{"--memory", "1M"}, []string{"memory"}},
		{[]string{"--memory", "nan"}, []string{"memory", "nan"}},
		{[]string{"--disk", "-5G"}, []string{"disk"}},
		{[]string{"--pids", "-1"}, []string{"pids", "-1"}},
		{[]string{"--pids", "many"}, []string{"pids"}},
		{[]string{"--cpus", "abc"}, []string{"cpus", "abc"}},
		{[]string{"--cpus", "-1"}, []string{"cpus"}},
		{[]string{"--timeout", "soon"}, []string{"timeout", "soon"}},
		{[]string{"--timeout", "-5s"}, []string{"timeout"}},
		{[]string{"--env", "NOEQUALS"}, []string{"env", "NOEQUALS"}},
		{[]string{"--env", "=x"}, []string{"env"}},
		{[]string{"--no-such-flag"}, []string{"no-such-flag"}},
		{[]string{"--memory"}, []string{"memory"}},
	}
	for _, c := range cases {
		args := append(append([]string{}, c.args...), "--", "true")
		r := runIn(t, dir, args...)
		oneLine(t, r, strings.Join(c.args, " "), c.names...)
		if r.took > 10*time.Second {
			t.Errorf("%q: took %v", c.args, r.took)
		}
	}
	r := runIn(t, dir)
	oneLine(t, r, "run without a command", "command")
	r = runIn(t, dir, "--")
	oneLine(t, r, "run -- without a command", "command")
	r = cli(t, "gc", "--data", dir, "extra")
	oneLine(t, r, "gc with an argument", "extra")
	r = cli(t, "frobnicate")
	oneLine(t, r, "unknown command", "frobnicate")
	r = cli(t, "agent")
	oneLine(t, r, "agent outside a computer", "agent")
}

func TestRunHelp(t *testing.T) {
	for _, args := range [][]string{{"run", "--help"}, {"run", "-h"}, {"gc", "--help"}} {
		r := cli(t, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "Example") || r.stderr != "" {
			t.Errorf("%q: code %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
		}
	}
	r := cli(t, "run", "--help")
	for _, flag := range []string{"-memory", "-timeout", "-pids", "-cpus", "-env", "-keep", "-data", "-disk"} {
		if !strings.Contains(r.stdout, flag) {
			t.Errorf("run --help does not document %s", flag)
		}
	}
	r = cli(t, "--help")
	if r.code != 0 || !strings.Contains(r.stdout, "run") || !strings.Contains(r.stdout, "gc") {
		t.Errorf("--help: code %d, stdout %q", r.code, r.stdout)
	}
	r = cli(t)
	if r.code != 2 || !strings.Contains(r.stdout, "Usage") {
		t.Errorf("no arguments: code %d, stdout %q", r.code, r.stdout)
	}
}

func TestRunKeepAndGC(t *testing.T) {
	dir := dataDir(t)
	r := runIn(t, dir, "--keep", "--", "sh", "-c", "echo hi > /workspace/f")
	if r.code != 0 {
		t.Fatalf("--keep: code %d, stderr %q", r.code, r.stderr)
	}
	m := regexp.MustCompile(`kept at (/\S+)`).FindStringSubmatch(r.stderr)
	if m == nil {
		t.Fatalf("--keep printed no path: %q", r.stderr)
	}
	kept := m[1]
	if !strings.HasPrefix(kept, dir) {
		t.Errorf("kept path %s is not under the state directory %s", kept, dir)
	}
	b, err := os.ReadFile(filepath.Join(kept, "f"))
	if err != nil || string(b) != "hi\n" {
		t.Fatalf("kept workspace file: %q, %v", b, err)
	}
	// A plain gc leaves kept workspaces alone.
	r = cli(t, "gc", "--data", dir)
	if r.code != 0 {
		t.Fatalf("gc: code %d, stderr %q", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(kept, "f")); err != nil {
		t.Fatalf("gc without --kept removed the kept workspace: %v", err)
	}
	// A run does not remove it either (it garbage-collects at start).
	if r := runIn(t, dir, "--", "true"); r.code != 0 {
		t.Fatalf("run: %d %q", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(kept, "f")); err != nil {
		t.Fatalf("a later run removed the kept workspace: %v", err)
	}

	r = cli(t, "gc", "--kept", "--json", "--data", dir)
	if r.code != 0 {
		t.Fatalf("gc --kept: code %d, stderr %q", r.code, r.stderr)
	}
	var rep struct {
		Computers *int `json:"computers"`
		Mounts    *int `json:"mounts"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || rep.Computers == nil {
		t.Fatalf("gc --json printed %q: %v", r.stdout, err)
	}
	if *rep.Computers != 1 || rep.Mounts == nil || *rep.Mounts < 1 {
		t.Errorf("gc --kept report %s: want 1 computer and its mount", r.stdout)
	}
	if _, err := os.Stat(kept); !os.IsNotExist(err) {
		t.Errorf("kept path %s still exists after gc --kept: %v", kept, err)
	}
	if b, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(b), kept) {
		t.Errorf("%s is still mounted", kept)
	}
	// Nothing left to collect.
	r = cli(t, "gc", "--kept", "--json", "--data", dir)
	if r.code != 0 || strings.TrimSpace(r.stdout) != `{"computers":0,"cgroups":0,"loops":0,"mounts":0}` {
		t.Errorf("second gc: code %d, stdout %q", r.code, r.stdout)
	}
}

func TestRunStdin(t *testing.T) {
	dir := dataDir(t)
	cmd := exec.Command(cubicleBin, "run", "--data", dir, "--timeout", "5s", "--", "sh", "-c", "wc -c")
	cmd.Stdin = strings.NewReader(strings.Repeat("x", 100_000))
	out, err := cmd.Output()
	if err != nil || strings.TrimSpace(string(out)) != "100000" {
		t.Errorf("stdin through the CLI: %q, %v", out, err)
	}
	// Stdin at EOF (here /dev/null) reaches the command as EOF.
	cmd = exec.Command(cubicleBin, "run", "--data", dir, "--timeout", "5s", "--", "cat")
	out, err = cmd.Output()
	if err != nil || len(out) != 0 {
		t.Errorf("cat with stdin at EOF: %q, %v", out, err)
	}
}
