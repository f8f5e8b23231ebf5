package linux_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/linux"
)

// agentPidOf reads the agent pid of computer id from its record.
func agentPidOf(t *testing.T, state, id string) int {
	t.Helper()
	var rec struct {
		AgentPid int `json:"agent_pid"`
	}
	b, err := os.ReadFile(filepath.Join(state, "computers", id, "computer.json"))
	if err != nil || json.Unmarshal(b, &rec) != nil || rec.AgentPid <= 0 {
		t.Fatalf("record of %s: %v %s", id, err, b)
	}
	return rec.AgentPid
}

// computerAndAgent starts a computer (of a driver of its own) and returns
// it with its agent's host pid.
func computerAndAgent(t *testing.T, tweak func(*sandbox.Spec)) (sandbox.Sandbox, int) {
	t.Helper()
	state := t.TempDir()
	d, err := linux.New(linux.Config{StateDir: state, AgentPath: agentBin})
	if err != nil {
		t.Fatal(err)
	}
	sb := newComputer(t, d, tweak)
	return sb, agentPidOf(t, state, sb.ID())
}

func cmdline(pid int) string {
	b, _ := os.ReadFile(filepath.Join("/proc", itoa(pid), "cmdline"))
	return strings.ReplaceAll(string(b), "\x00", " ")
}

// TestAgentsForkedByLauncher: a computer's agent is the child of the
// launcher, a process of the agent executable that this process started
// without a user namespace of its own (so with vfork), not of this
// process (whose fork would copy its page tables).
func TestAgentsForkedByLauncher(t *testing.T) {
	_, agent := computerAndAgent(t, smallDisk)
	launcher := ppid(agent)
	if launcher == os.Getpid() {
		t.Fatal("the agent is a child of the driver's process, not of the launcher")
	}
	if launcher != linux.LauncherPid() || ppid(launcher) != os.Getpid() {
		t.Fatalf("agent %d has parent %d (%q), want the launcher %d, child of this process %d",
			agent, launcher, cmdline(launcher), linux.LauncherPid(), os.Getpid())
	}
	if got := cmdline(launcher); got != "cubicle launcher " {
		t.Fatalf("launcher command line %q", got)
	}
	mine, _ := os.Readlink("/proc/self/ns/user")
	if theirs, _ := os.Readlink(filepath.Join("/proc", itoa(launcher), "ns/user")); theirs != mine {
		t.Fatalf("the launcher is in user namespace %s, this process in %s", theirs, mine)
	}
	// By hand the hidden command is refused (no driver's socket at fd 3).
	for _, bin := range []string{agentBin, "/proc/" + itoa(launcher) + "/exe"} {
		out, err := exec.Command(bin, linux.LauncherArg).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("%s %s by hand: %v %q, want exit status 2", bin, linux.LauncherArg, err, out)
		}
	}
}

// TestLauncherDeath: when the launcher dies, a start waiting for it fails
// with the reason, the computers it had started end with it and are seen
// to (Done, ExitReason) and can be destroyed, and the next computer gets a
// new launcher, whose agents are managed as before.
func TestLauncherDeath(t *testing.T) {
	state := t.TempDir()
	d, err := linux.New(linux.Config{StateDir: state, AgentPath: agentBin})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	running := newComputer(t, d, smallDisk)
	mustSucceed(t, running, "true")
	runningAgent := agentPidOf(t, state, running.ID())
	old := linux.LauncherPid()
	if old == 0 {
		t.Fatal("no launcher after a computer started")
	}
	// It runs an in-memory copy: nothing pins a state directory (its
	// filesystem could not be unmounted while this process lives).
	if exe, _ := os.Readlink(filepath.Join("/proc", itoa(old), "exe")); !strings.HasPrefix(exe, "/memfd:") {
		t.Fatalf("the launcher runs %q, want a memfd", exe)
	}
	// A start in flight: the launcher, stopped, holds its request.
	if err := syscall.Kill(old, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	spec := sandbox.DefaultSpec()
	smallDisk(&spec)
	created := make(chan error, 1)
	go func() {
		sb, err := d.Create(ctx, spec)
		if err == nil {
			sb.Destroy(ctx)
		}
		created <- err
	}()
	for deadline := time.Now().Add(30 * time.Second); linux.LauncherPending() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			syscall.Kill(old, syscall.SIGCONT)
			t.Fatal("the create never asked the launcher")
		}
	}
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-created:
		if err == nil || !strings.Contains(err.Error(), "launcher ended") {
			t.Fatalf("a create in flight when the launcher died: %v, want the launcher's end", err)
		}
		t.Logf("a create in flight: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("a create in flight when the launcher died did not return")
	}
	select {
	case <-running.Done():
	case <-time.After(30 * time.Second): // an exit unmounts the workspace, slow on a busy disk
		stat, _ := os.ReadFile(filepath.Join("/proc", itoa(runningAgent), "stat"))
		t.Fatalf("the running computer's end was not seen after the launcher died; its agent: %s", stat)
	}
	if r := running.ExitReason(); !strings.Contains(r, "launcher ended") {
		t.Fatalf("exit reason %q", r)
	} else {
		t.Logf("a running computer: %s", r)
	}
	if _, err := running.Exec(ctx, sandbox.ExecRequest{Command: "true"}, sandbox.ExecIO{}); err == nil {
		t.Fatal("exec in a computer whose agent died succeeded")
	}
	if err := running.Destroy(ctx); err != nil {
		t.Fatalf("destroy after the launcher died: %v", err)
	}

	next := newComputer(t, d, smallDisk)
	mustSucceed(t, next, "true")
	if now := linux.LauncherPid(); now == 0 || now == old {
		t.Fatalf("launcher after the death: %d (the dead one %d)", now, old)
	}
	agent := agentPidOf(t, state, next.ID())
	if err := syscall.Kill(agent, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-next.Done():
	case <-time.After(30 * time.Second): // an exit unmounts the workspace, slow on a busy disk
		t.Fatal("the new launcher's agent was killed and its end not seen")
	}
	if r := next.ExitReason(); r != "killed by signal 9 (SIGKILL)" {
		t.Fatalf("exit reason of a killed agent: %q", r)
	}
}

// TestLauncherCannotStart: when the agent executable cannot serve as the
// launcher, a create fails saying so (there is no in-process fallback),
// and a later one with a working executable starts a launcher again.
func TestLauncherCannotStart(t *testing.T) {
	d := newDriver(t)
	mustSucceed(t, newComputer(t, d, smallDisk), "true")
	if err := syscall.Kill(linux.LauncherPid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); linux.LauncherPid() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the launcher's death was not seen")
		}
	}
	broken, err := linux.New(linux.Config{StateDir: t.TempDir(), AgentPath: "/bin/true"})
	if err != nil {
		t.Fatal(err)
	}
	spec := sandbox.DefaultSpec()
	smallDisk(&spec)
	sb, err := broken.Create(context.Background(), spec)
	if err == nil {
		sb.Destroy(context.Background())
		t.Fatal("a computer started without a launcher")
	}
	if !strings.Contains(err.Error(), "start the agent launcher /bin/true") {
		t.Fatalf("create without a launcher: %v", err)
	}
	t.Logf("create without a launcher: %v", err)
	mustSucceed(t, newComputer(t, d, smallDisk), "true")
}
