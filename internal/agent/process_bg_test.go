package agent_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// follow reads a background process's output from offset until it exits.
func follow(t *testing.T, sb sandbox.Sandbox, id string, offset int64) (stdout, stderr string, marks [][2]int64, end sandbox.OutputEnd) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	end, err := sb.ProcessOutput(ctx, sandbox.OutputRequest{ID: id, Offset: offset, Follow: true},
		sandbox.OutputIO{Stdout: &out, Stderr: &errb, Mark: func(o, d int64) { marks = append(marks, [2]int64{o, d}) }})
	if err != nil {
		t.Fatalf("output of %s: %v", id, err)
	}
	return out.String(), errb.String(), marks, end
}

// waitExit waits until a background process exited.
func waitExit(t *testing.T, sb sandbox.Sandbox, id string) sandbox.ProcessInfo {
	t.Helper()
	for i := 0; i < 600; i++ {
		info, err := sb.GetProcess(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if !info.Running {
			return info
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s still runs", id)
	return sandbox.ProcessInfo{}
}

// A background process runs past the call that started it; its output is
// read back from any offset, stdout and stderr apart, and its exit is
// reported with its times.
func TestBackgroundProcess(t *testing.T) {
	sb, _ := realComputer(t)
	ctx := context.Background()
	info, err := sb.StartProcess(ctx, sandbox.ProcessStart{Command: "echo one; echo two >&2; sleep 0.5; echo three; exit 7"})
	if err != nil {
		t.Fatal(err)
	}
	if !info.Running || info.Pid <= 1 || info.ID != "proc_1" || info.Cwd != "/workspace" || info.StartedAt.IsZero() {
		t.Fatalf("started: %+v", info)
	}
	stdout, stderr, marks, end := follow(t, sb, info.ID, 0)
	if stdout != "one\nthree\n" || stderr != "two\n" || fmt.Sprint(marks) != "[[0 0]]" {
		t.Fatalf("output %q %q marks %v", stdout, stderr, marks)
	}
	p := end.Process
	if end.Next != 14 || p.Running || p.Exit.ExitCode != 7 || p.EndedAt.Before(p.StartedAt.Add(400*time.Millisecond)) || p.OutputEnd != 14 {
		t.Fatalf("end %+v", end)
	}
	// From an offset, without following: the rest only.
	var out bytes.Buffer
	end, err = sb.ProcessOutput(ctx, sandbox.OutputRequest{ID: info.ID, Offset: 8}, sandbox.OutputIO{Stdout: &out, Stderr: &out})
	if err != nil || out.String() != "three\n" || end.Next != 14 {
		t.Fatalf("from 8: %q %+v %v", out.String(), end, err)
	}
	if _, err := sb.ProcessOutput(ctx, sandbox.OutputRequest{ID: info.ID, Offset: 15}, sandbox.OutputIO{}); !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatalf("offset past the end: %v", err)
	}
	list, err := sb.ListProcesses(ctx)
	if err != nil || len(list) != 1 || list[0].ID != info.ID || list[0].Exit.ExitCode != 7 {
		t.Fatalf("list: %+v %v", list, err)
	}
	if _, err := sb.GetProcess(ctx, "proc_99"); !errors.Is(err, sandbox.ErrNoProcess) {
		t.Fatalf("get of no process: %v", err)
	}
}

// Bytes written to a background cat come back in its output; closing its
// stdin ends it; a closed stdin refuses more.
func TestBackgroundStdin(t *testing.T) {
	sb, _ := realComputer(t)
	ctx := context.Background()
	info, err := sb.StartProcess(ctx, sandbox.ProcessStart{Argv: []string{"cat"}, Stdin: []byte("first\n")})
	if err != nil {
		t.Fatal(err)
	}
	res, err := sb.WriteStdin(ctx, sandbox.StdinWrite{ID: info.ID, Data: []byte("second\n"), Close: true})
	if err != nil || res.Written != 7 || !res.Closed {
		t.Fatalf("write stdin: %+v %v", res, err)
	}
	stdout, _, _, end := follow(t, sb, info.ID, 0)
	if stdout != "first\nsecond\n" || end.Process.Exit.ExitCode != 0 || end.Process.StdinOpen {
		t.Fatalf("cat: %q %+v", stdout, end)
	}
	if _, err := sb.WriteStdin(ctx, sandbox.StdinWrite{ID: info.ID, Data: []byte("x")}); !errors.Is(err, sandbox.ErrStdinClosed) {
		t.Fatalf("write to a closed stdin: %v", err)
	}
}

// A signal reaches the process; its exit says which.
func TestBackgroundSignal(t *testing.T) {
	sb, _ := realComputer(t)
	ctx := context.Background()
	info, err := sb.StartProcess(ctx, sandbox.ProcessStart{Argv: []string{"sleep", "100"}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := sb.SignalProcess(ctx, info.ID, 15, 5*time.Second)
	if err != nil || got.Running || got.Exit.Signal != 15 || got.Exit.ExitCode != -1 {
		t.Fatalf("after SIGTERM: %+v %v", got, err)
	}
}

// The ring keeps the newest 1 MiB: a read from 0 says how many bytes were
// lost and gets exactly the rest.
func TestBackgroundRingOverflow(t *testing.T) {
	sb, _ := realComputer(t)
	info, err := sb.StartProcess(context.Background(), sandbox.ProcessStart{Command: "head -c 3000000 /dev/zero | tr '\\0' a; echo -n END"})
	if err != nil {
		t.Fatal(err)
	}
	waitExit(t, sb, info.ID)
	stdout, _, marks, end := follow(t, sb, info.ID, 0)
	total := int64(3000003)
	if end.Next != total || int64(len(stdout)) != protocol.ProcRing || !strings.HasSuffix(stdout, "aaEND") {
		t.Fatalf("read %d bytes (%q…), next %d", len(stdout), stdout[max(0, len(stdout)-8):], end.Next)
	}
	if want := fmt.Sprint([][2]int64{{total - protocol.ProcRing, total - protocol.ProcRing}}); fmt.Sprint(marks) != want {
		t.Fatalf("marks %v, want %s", marks, want)
	}
	if end.Process.OutputStart != total-protocol.ProcRing {
		t.Fatalf("output start %d", end.Process.OutputStart)
	}
}

// At most MaxProcs run at once; an exited one makes room (and is
// forgotten, the oldest exited first).
func TestBackgroundLimit(t *testing.T) {
	sb, _ := realComputer(t)
	ctx := context.Background()
	var first string
	for i := 0; i < protocol.MaxProcs; i++ {
		info, err := sb.StartProcess(ctx, sandbox.ProcessStart{Argv: []string{"sleep", "100"}})
		if err != nil {
			t.Fatalf("process %d: %v", i, err)
		}
		if i == 0 {
			first = info.ID
		}
	}
	if _, err := sb.StartProcess(ctx, sandbox.ProcessStart{Argv: []string{"true"}}); !errors.Is(err, sandbox.ErrTooManyProcesses) {
		t.Fatalf("process %d: %v", protocol.MaxProcs+1, err)
	}
	if got, err := sb.SignalProcess(ctx, first, 9, 5*time.Second); err != nil || got.Running {
		t.Fatalf("kill: %+v %v", got, err)
	}
	if _, err := sb.StartProcess(ctx, sandbox.ProcessStart{Argv: []string{"true"}}); err != nil {
		t.Fatalf("after one exited: %v", err)
	}
	if _, err := sb.GetProcess(ctx, first); !errors.Is(err, sandbox.ErrNoProcess) {
		t.Fatalf("the exited one should be forgotten: %v", err)
	}
}
