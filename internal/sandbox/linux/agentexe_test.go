package linux_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/linux"
)

// agentExe returns the executable of the agent of the one computer under
// state, from the host.
func agentExe(t *testing.T, state string) string {
	t.Helper()
	recs, _ := filepath.Glob(filepath.Join(state, "computers", "*", "computer.json"))
	var rec struct {
		AgentPid int `json:"agent_pid"`
	}
	if len(recs) != 1 {
		t.Fatalf("records: %v", recs)
	}
	if b, err := os.ReadFile(recs[0]); err != nil || json.Unmarshal(b, &rec) != nil || rec.AgentPid == 0 {
		t.Fatalf("record %s: %v %+v", recs[0], err, rec)
	}
	exe, err := os.Readlink(filepath.Join("/proc", itoa(rec.AgentPid), "exe"))
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

func itoa(n int) string { return strconv.Itoa(n) }

func smallDisk(s *sandbox.Spec) { s.DiskBytes = 32 << 20 }

// TestAgentExecutable: computers of a cubicle binary that carries the lean
// agent (make build) run that agent, stored once in the state directory
// under its hash; a binary that carries none (the lean agent itself, asked
// for one) is its own agent.
func TestAgentExecutable(t *testing.T) {
	carried, _ := exec.Command(agentBin, linux.AgentBinaryArg).Output()
	state := t.TempDir()
	// An agent of another version, two days old, and one of a minute ago.
	agents := filepath.Join(state, "agent")
	os.MkdirAll(agents, 0o700)
	old, recent := filepath.Join(agents, "0123456789abcdef"), filepath.Join(agents, "fedcba9876543210")
	for _, f := range []string{old, recent} {
		os.WriteFile(f, []byte("an old agent"), 0o500)
	}
	os.Chtimes(old, time.Now().Add(-48*time.Hour), time.Now().Add(-48*time.Hour))
	d, err := linux.New(linux.Config{StateDir: state, AgentPath: agentBin})
	if err != nil {
		t.Fatal(err)
	}
	sb := newComputer(t, d, smallDisk)
	mustSucceed(t, sb, "true")
	exe := agentExe(t, state)
	if len(carried) == 0 {
		if want, _ := filepath.EvalSymlinks(agentBin); exe != want {
			t.Fatalf("a binary without a carried agent: computers run %s, want the binary %s", exe, want)
		}
		return
	}
	if filepath.Dir(exe) != filepath.Join(state, "agent") {
		t.Fatalf("computers run %s, want the carried agent under %s/agent", exe, state)
	}
	if b, err := os.ReadFile(exe); err != nil || !bytes.Equal(b, carried) {
		t.Fatalf("%s is not the agent %s carries (%d bytes): %v", exe, agentBin, len(carried), err)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("a two-day-old agent of another version was kept: %v", err)
	}
	if _, err := os.Stat(recent); err != nil {
		t.Errorf("a recent agent of another version was removed: %v", err)
	}
	other := t.TempDir()
	d2, err := linux.New(linux.Config{StateDir: other, AgentPath: exe})
	if err != nil {
		t.Fatal(err)
	}
	mustSucceed(t, newComputer(t, d2, smallDisk), "true")
	if got := agentExe(t, other); got != exe {
		t.Fatalf("the lean agent as AgentPath: computers run %s, want %s itself", got, exe)
	}
}

// TestAgentOnNoexecState: when the state directory cannot hold an
// executable (mounted noexec), computers run the cubicle binary itself.
func TestAgentOnNoexecState(t *testing.T) {
	state := t.TempDir()
	if err := unix.Mount("tmpfs", state, "tmpfs", unix.MS_NOEXEC, "size=256m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(state, unix.MNT_DETACH) })
	d, err := linux.New(linux.Config{StateDir: state, AgentPath: agentBin})
	if err != nil {
		t.Fatal(err)
	}
	sb := newComputer(t, d, smallDisk)
	mustSucceed(t, sb, "true")
	if want, _ := filepath.EvalSymlinks(agentBin); agentExe(t, state) != want {
		t.Fatalf("on a noexec state directory computers run %s, want %s", agentExe(t, state), want)
	}
}
