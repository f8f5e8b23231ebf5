package e2b_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// sdkResult is what testdata/sdk/client.mjs prints.
type sdkResult struct {
	BadKey  struct{ Name, Message string }
	ID      string
	Running bool
	Run     struct {
		ExitCode       int
		Stdout, Stderr string
		Callbacks      struct{ Stdout, Stderr string }
	}
	Failed struct {
		Name     string
		ExitCode int
		Stderr   string
	}
	Written   struct{ Path, Name string }
	Read      string
	ReadBytes []int
	Listed    []string
	Exists    []bool
	Missing   struct{ Name, Message string }
	EnvCwd    string
	FsOps     struct {
		Made    []bool
		Moved   string
		Deep    []string
		Removed bool
	}
	Stdin, Connected string
	BgPid            int
	ListedPid        []int `json:"listedPids"`
	During           string
	Bg               struct {
		ExitCode         int
		Stdout, Callback string
	}
	Killed     bool
	KilledWait struct {
		Name     string
		ExitCode int
	}
	KilledAgain bool
	CodeText    string
	CodeStdout  struct{ Logs, Callback []string }
	Chart       []struct {
		PNG     string
		Formats []string
		Main    bool
	}
	Table []struct {
		Text string
		Main bool
	}
	CodeError *struct {
		Name, Value string
		Traceback   bool
	}
	Timeout struct {
		Before, After int64
		State         string
	}
	List    []struct{ ID, State, Purpose string }
	Paused  []bool
	Resumed struct {
		Same        bool
		Read, State string
	}
	Base                                      struct{ ID, Uname string }
	BaseKilled, Kill, KillAgain, RunningAfter bool
	AfterKill                                 struct{ Name, Message string }
}

// TestE2BSDK: the unmodified npm SDKs e2b and @e2b/code-interpreter
// (installed by `make test`: scripts/testdeps.sh), configured only by
// E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY, against a real server:
// a refused key; create; commands with callbacks, a failing one, envs and
// cwd, a background command (listed, waited for) and a killed one, stdin,
// connect; files written, read, listed (with depth), tested, made, moved
// and removed; runCode's text, stdout, PNG chart, table and error;
// setTimeout; list by metadata; pause and connect; the base template;
// kill.
func TestE2BSDK(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("testdata/sdk/node_modules/@e2b/code-interpreter"); err != nil {
		t.Fatalf("the E2B SDKs are not installed (make test installs them: bash scripts/testdeps.sh): %v", err)
	}
	srv := newServer(t)
	key := srv.key(computerCaps)
	cmd := exec.CommandContext(t.Context(), "node", "client.mjs")
	cmd.Dir = "testdata/sdk"
	cmd.Env = append(os.Environ(), "E2B_API_URL="+srv.url, "E2B_SANDBOX_URL="+srv.url, "E2B_API_KEY="+key)
	cmd.WaitDelay = 5 * time.Second
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s\n%s", err, out, stderr.String())
	}
	t.Logf("the SDKs saw: %s", out)
	var got sdkResult
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s\n%s", err, out, stderr.String())
	}
	if got.BadKey.Name != "AuthenticationError" {
		t.Errorf("a bad key: %+v", got.BadKey)
	}
	if !strings.HasPrefix(got.ID, "cmp_") || !got.Running {
		t.Fatalf("created %q, running %v", got.ID, got.Running)
	}
	if r := got.Run; r.ExitCode != 0 || r.Stdout != "out1\nout2\n" || r.Stderr != "err1\n" || r.Callbacks.Stdout != r.Stdout || r.Callbacks.Stderr != r.Stderr {
		t.Errorf("run: %+v", r)
	}
	if f := got.Failed; f.Name != "CommandExitError" || f.ExitCode != 3 || f.Stderr != "bad\n" {
		t.Errorf("failing command: %+v", f)
	}
	if got.Written.Path != "/workspace/sub/hello.txt" || got.Written.Name != "hello.txt" || got.Read != "hello from e2b" {
		t.Errorf("written %+v, read %q", got.Written, got.Read)
	}
	if !slices.Equal(got.ReadBytes, []int{0, 1, 2, 255}) {
		t.Errorf("bytes read: %v", got.ReadBytes)
	}
	if want := []string{"file:a.txt:1", "file:b.bin:4", "file:hello.txt:14"}; !slices.Equal(got.Listed, want) {
		t.Errorf("listed %v, want %v", got.Listed, want)
	}
	if !slices.Equal(got.Exists, []bool{true, false}) {
		t.Errorf("exists: %v", got.Exists)
	}
	if got.Missing.Name != "FileNotFoundError" || got.Missing.Message != "/workspace/missing.txt: no such file or directory" {
		t.Errorf("reading a missing file: %+v", got.Missing)
	}
	if got.EnvCwd != "hi there\n/workspace/sub\nhello from e2b" {
		t.Errorf("envs and cwd: %q", got.EnvCwd)
	}
	if f := got.FsOps; !slices.Equal(f.Made, []bool{true, false}) || f.Moved != "/workspace/d1/d2/a.txt" ||
		!slices.Equal(f.Deep, []string{"/workspace/d1/d2", "/workspace/d1/d2/a.txt"}) || !f.Removed {
		t.Errorf("makeDir, rename, list with depth, remove: %+v", f)
	}
	if got.Stdin != "piped\n" || got.Connected != "late\n" {
		t.Errorf("stdin %q, connected %q", got.Stdin, got.Connected)
	}
	if got.BgPid <= 0 || !slices.Contains(got.ListedPid, got.BgPid) || got.During != "during\n" {
		t.Errorf("background pid %d, listed %v, during %q", got.BgPid, got.ListedPid, got.During)
	}
	if b := got.Bg; b.ExitCode != 0 || b.Stdout != "bg-done\n" || b.Callback != "bg-done\n" {
		t.Errorf("background: %+v", b)
	}
	if !got.Killed || got.KilledWait.Name != "CommandExitError" || got.KilledWait.ExitCode != -1 || got.KilledAgain {
		t.Errorf("killed %v, its wait %+v, killed again %v", got.Killed, got.KilledWait, got.KilledAgain)
	}
	if got.CodeText != "42" || !slices.Equal(got.CodeStdout.Logs, []string{"hello 42\n"}) || !slices.Equal(got.CodeStdout.Callback, got.CodeStdout.Logs) {
		t.Errorf("runCode text %q, stdout %+v", got.CodeText, got.CodeStdout)
	}
	if len(got.Chart) != 1 || got.Chart[0].PNG != "iVBORw0KGgoA" || !slices.Contains(got.Chart[0].Formats, "png") {
		t.Errorf("chart: %+v", got.Chart)
	}
	if len(got.Table) != 1 || !got.Table[0].Main || !strings.Contains(got.Table[0].Text, "Oslo") || !strings.Contains(got.Table[0].Text, "temp") {
		t.Errorf("table: %+v", got.Table)
	}
	if e := got.CodeError; e == nil || e.Name != "ZeroDivisionError" || e.Value != "division by zero" || !e.Traceback {
		t.Errorf("code error: %+v", got.CodeError)
	}
	if tm := got.Timeout; tm.Before > 125_000 || tm.After < 590_000 || tm.After > 605_000 || tm.State != "running" {
		t.Errorf("timeout: %+v", tm)
	}
	if len(got.List) != 1 || got.List[0].ID != got.ID || got.List[0].State != "running" || got.List[0].Purpose != "e2b-sdk-test" {
		t.Errorf("list: %+v", got.List)
	}
	if !slices.Equal(got.Paused, []bool{true, false, false}) || !got.Resumed.Same || got.Resumed.Read != "hello from e2b" || got.Resumed.State != "running" {
		t.Errorf("paused %v, resumed %+v", got.Paused, got.Resumed)
	}
	if !strings.HasPrefix(got.Base.ID, "cmp_") || got.Base.Uname != "Linux\n" || !got.BaseKilled {
		t.Errorf("base sandbox %+v, killed %v", got.Base, got.BaseKilled)
	}
	if !got.Kill || got.KillAgain || got.RunningAfter {
		t.Errorf("kill %v, again %v, running after %v", got.Kill, got.KillAgain, got.RunningAfter)
	}
	if got.AfterKill.Name == "no error" {
		t.Errorf("a command after kill: %+v", got.AfterKill)
	}
}
