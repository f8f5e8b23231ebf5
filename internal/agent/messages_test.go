package agent_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// A working directory in the agent's /proc passes a check made by the
// agent (it sees itself) but not the user's process: it is refused as
// unusable, not reported as a missing program.
func TestCwdInTheAgentsProc(t *testing.T) {
	sb, _ := realComputer(t)
	ctx := context.Background()
	// The agent's server is the parent of every command (PID 1 is the
	// computer's init, which commands cannot see either).
	agent := "/proc/" + strings.TrimSpace(mustRun(t, sb, "echo $PPID"))
	want := "working directory " + agent + " cannot be used: it is in /proc of the computer's agent"
	_, err := sb.Python(ctx, sandbox.PythonRequest{Cells: []sandbox.PythonCell{{Code: "1"}}, Cwd: agent, Mode: "per_call",
		Timeout: time.Minute}, nil)
	if !errors.Is(err, sandbox.ErrNotFound) || !strings.Contains(err.Error(), want) {
		t.Errorf("python with cwd %s: %v", agent, err)
	}
	_, err = sb.Exec(ctx, sandbox.ExecRequest{Command: "pwd", Cwd: agent + "/task"}, sandbox.ExecIO{})
	if !errors.Is(err, sandbox.ErrNotFound) || !strings.Contains(err.Error(), "working directory "+agent+"/task cannot be used") {
		t.Errorf("exec with cwd %s/task: %v", agent, err)
	}
	_, err = sb.Exec(ctx, sandbox.ExecRequest{Command: "pwd", Cwd: "/proc/1"}, sandbox.ExecIO{})
	if !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("exec with cwd /proc/1: %v", err)
	}
	if out := mustRun(t, sb, "cd /proc/self && pwd"); out != "/proc/self\n" {
		t.Errorf("a process's own /proc: %q", out)
	}
}
