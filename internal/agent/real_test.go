package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/linux"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/sandboxtest"
	"github.com/cubicle-sandbox/cubicle/internal/testbin"
)

// agentBin is the real cubicle binary; the computers of these tests run it
// as their agent.
var agentBin string

func TestMain(m *testing.M) { os.Exit(testbin.Main(m, &agentBin)) }

// realComputer starts a computer with default limits, destroyed when the
// test ends, and returns it with its driver's state directory.
func realComputer(t *testing.T) (sandbox.Sandbox, string) {
	t.Helper()
	state := t.TempDir()
	d, err := linux.New(linux.Config{StateDir: state, AgentPath: agentBin})
	if err != nil {
		t.Fatalf("linux.New: %v", err)
	}
	return sandboxtest.Start(t, d, nil), state
}

// agentPid is the host pid of sb's agent, from the driver's record.
func agentPid(t *testing.T, sb sandbox.Sandbox, state string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(state, "computers", sb.ID(), "computer.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		AgentPid int `json:"agent_pid"`
	}
	if err := json.Unmarshal(b, &rec); err != nil || rec.AgentPid <= 0 {
		t.Fatalf("record %s: %v", b, err)
	}
	return rec.AgentPid
}

// cpuTicks is the CPU time (user and system, in clock ticks) that process
// pid has used, from /proc/pid/stat.
func cpuTicks(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	// After the command name: state is field 3, utime 14 and stime 15.
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return utime + stime
}

// mustRun runs a shell command in sb and fails the test unless it exits 0.
func mustRun(t *testing.T, sb sandbox.Sandbox, command string) string {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := sb.Exec(ctx, sandbox.ExecRequest{Command: command}, sandbox.ExecIO{Stdout: &out, Stderr: &errb})
	if err != nil || st.ExitCode != 0 {
		t.Fatalf("%q: %+v %v\nstdout: %s\nstderr: %s", command, st, err, out.String(), errb.String())
	}
	return out.String()
}

func writeFile(t *testing.T, sb sandbox.Sandbox, p, content string) {
	t.Helper()
	if _, err := sb.WriteFile(context.Background(), sandbox.FileWrite{Path: p}, strings.NewReader(content)); err != nil {
		t.Fatalf("write %s: %v", p, err)
	}
}

// waitFile waits until p exists in sb.
func waitFile(t *testing.T, sb sandbox.Sandbox, p string) {
	t.Helper()
	for i := 0; i < 300; i++ {
		if _, err := sb.Stat(context.Background(), p); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s never appeared", p)
}
