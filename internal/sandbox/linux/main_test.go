package linux_test

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/testbin"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/linux"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/sandboxtest"
)

// agentBin is the real cubicle binary, built without cgo as in production;
// computers in these tests run it as their agent. The test binary itself
// may be built with -race (which needs cgo).
var agentBin string

func TestMain(m *testing.M) {
	code := testbin.Main(m, &agentBin)
	if toolsDir != "" {
		os.RemoveAll(toolsDir)
	}
	os.Exit(code)
}

// newDriver returns a driver with its own state directory.
func newDriver(t testing.TB) *linux.Driver {
	t.Helper()
	d, err := linux.New(linux.Config{StateDir: t.TempDir(), AgentPath: agentBin})
	if err != nil {
		t.Fatalf("linux.New: %v", err)
	}
	return d
}

// newComputer starts a computer (default limits, adjusted by tweak) that is
// destroyed when the test ends.
func newComputer(t testing.TB, d *linux.Driver, tweak func(*sandbox.Spec)) sandbox.Sandbox {
	t.Helper()
	return sandboxtest.Start(t, d, tweak)
}

// result is a finished process with its captured output.
type result struct {
	sandbox.ExitStatus
	Stdout, Stderr string
}

// run runs a shell command in sb and captures its output.
func run(t testing.TB, sb sandbox.Sandbox, command string) result {
	t.Helper()
	return runReq(t, sb, sandbox.ExecRequest{Command: command}, nil)
}

func runReq(t testing.TB, sb sandbox.Sandbox, req sandbox.ExecRequest, stdin *strings.Reader) result {
	t.Helper()
	var out, errb bytes.Buffer
	sio := sandbox.ExecIO{Stdout: &out, Stderr: &errb}
	if stdin != nil {
		sio.Stdin = stdin
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := sb.Exec(ctx, req, sio)
	if err != nil {
		t.Fatalf("exec %v %q: %v", req.Argv, req.Command, err)
	}
	return result{ExitStatus: st, Stdout: out.String(), Stderr: errb.String()}
}

// mustSucceed runs command and fails the test unless it exits 0.
func mustSucceed(t testing.TB, sb sandbox.Sandbox, command string) string {
	t.Helper()
	r := run(t, sb, command)
	if r.ExitCode != 0 {
		t.Fatalf("%q: exit %d signal %d\nstdout: %s\nstderr: %s", command, r.ExitCode, r.Signal, r.Stdout, r.Stderr)
	}
	return r.Stdout
}
