package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/tools"
)

// holdLease starts a process in sb that takes a write lease on p, ignores
// the SIGIO that asks it to let go, and keeps the lease until it is killed
// (or the kernel breaks it after fs.lease-break-time).
func holdLease(t *testing.T, sb sandbox.Sandbox, p string) {
	t.Helper()
	writeFile(t, sb, "/workspace/hold.py", `import fcntl, os, signal, sys, time
signal.signal(signal.SIGIO, signal.SIG_IGN)
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)
open("/workspace/held", "w").close()
time.sleep(600)
`)
	mustRun(t, sb, "/usr/bin/python3 /workspace/hold.py "+p+" >/workspace/hold.log 2>&1 & echo $! >/workspace/hold.pid")
	waitFile(t, sb, "/workspace/held")
}

// A leased file: reading it fails with ErrLocked and a sentence saying so,
// without the agent spinning, while other file calls of the computer go on.
func TestFileLeaseIsBoundedAndDoesNotSpin(t *testing.T) {
	sb, state := realComputer(t)
	pid := agentPid(t, sb, state)
	writeFile(t, sb, "/workspace/leased", "leased content")
	writeFile(t, sb, "/workspace/other", "other content")
	holdLease(t, sb, "/workspace/leased")
	ctx := context.Background()

	before := cpuTicks(t, pid)
	var wg sync.WaitGroup
	var finished atomic.Int32
	errs := make([]error, 3)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = sb.ReadFile(ctx, sandbox.FileRead{Path: "/workspace/leased"}, &bytes.Buffer{})
			finished.Add(1)
		}()
	}
	var tool tools.Result
	wg.Add(1)
	go func() {
		defer wg.Done()
		tool, _ = tools.Default().Run(ctx, tools.Env{Sandbox: sb}, tools.ReadFileName, json.RawMessage(`{"path":"leased"}`))
		finished.Add(1)
	}()
	// Meanwhile, with every worker's share of leased reads pending, other
	// files are read, written and stat'ed.
	var other bytes.Buffer
	if _, err := sb.ReadFile(ctx, sandbox.FileRead{Path: "/workspace/other"}, &other); err != nil || other.String() != "other content" {
		t.Errorf("read another file during the lease: %q %v", other.String(), err)
	}
	writeFile(t, sb, "/workspace/third", "x")
	if fi, err := sb.Stat(ctx, "/workspace/leased"); err != nil || fi.Size != int64(len("leased content")) {
		t.Errorf("stat the leased file: %+v %v", fi, err)
	}
	if n := finished.Load(); n != 0 {
		t.Errorf("the other files' calls waited for %d leased read(s) to give up", n)
	}
	wg.Wait()
	used := cpuTicks(t, pid) - before

	for _, err := range errs {
		if !errors.Is(err, sandbox.ErrLocked) || !strings.Contains(err.Error(), "/workspace/leased: the file is locked by a process in the computer (a lease); try again later") {
			t.Errorf("read of a leased file: %v", err)
		}
	}
	if want := "File is locked by a process in the computer (a lease); try again later: /workspace/leased"; tool.Output != want || !tool.Failed {
		t.Errorf("read_file tool on a leased file: %+v, want %q", tool, want)
	}
	// Clock ticks are 1/100 s: busy-waiting for the lease's ~2 s would
	// burn whole seconds; sleeping between tries costs next to nothing.
	t.Logf("agent CPU while the file was leased: %d clock ticks", used)
	if used > 50 {
		t.Errorf("the agent used %d clock ticks of CPU while the file was leased", used)
	}
	// Writing the leased file replaces it (a new file renamed over it):
	// no lease holds that up, and the new content reads at once.
	writeFile(t, sb, "/workspace/leased", "replaced")
	var replaced bytes.Buffer
	if _, err := sb.ReadFile(ctx, sandbox.FileRead{Path: "/workspace/leased"}, &replaced); err != nil || replaced.String() != "replaced" {
		t.Errorf("read after replacing the leased file: %q %v", replaced.String(), err)
	}
	writeFile(t, sb, "/workspace/leased", "leased content")
	// Once the holder is gone, the file reads again.
	mustRun(t, sb, "p=$(cat /workspace/hold.pid); kill $p; while kill -0 $p 2>/dev/null; do sleep 0.05; done")
	var got bytes.Buffer
	if _, err := sb.ReadFile(ctx, sandbox.FileRead{Path: "/workspace/leased"}, &got); err != nil || got.String() != "leased content" {
		t.Errorf("read after the lease: %q %v", got.String(), err)
	}
}
