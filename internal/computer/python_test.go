package computer

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/linux"
	"github.com/cubicle-sandbox/cubicle/internal/store/sqlite"
)

// agentBinary is the cubicle binary computers run as their agent:
// $CUBICLE_BIN, or one built for the test.
func agentBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CUBICLE_BIN"); p != "" {
		return p
	}
	bin := filepath.Join(t.TempDir(), "cubicle")
	build := exec.Command("go", "build", "-o", bin, "github.com/cubicle-sandbox/cubicle/cmd/cubicle")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build cubicle: %v\n%s", err, out)
	}
	return bin
}

// A computer whose lifetime runs out while its kernel starts: the call
// says that the lifetime ran out, not how the kernel died (SIGKILL).
func TestPythonLifetimeEndsDuringKernelStart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	drv, err := linux.New(linux.Config{StateDir: dir, AgentPath: agentBinary(t)})
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(ctx, filepath.Join(dir, "cubicle.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	gov := governance.New(st)
	key := "cub_python_lifetime_key_1"
	if _, err := gov.Bootstrap(ctx, key); err != nil {
		t.Fatal(err)
	}
	p, err := gov.Authenticate(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	// The prelude (part of a kernel's start) outlasts the lifetime.
	m := New(Config{Memory: 256 << 20, Pids: 256, CPUs: 1, Disk: 64 << 20, Lifetime: 600 * time.Second, ExecTimeout: 30 * time.Second,
		MaxConcurrent: 4, MemoryBudget: 8 << 30, MaxFileBytes: 1 << 20, MaxOutputBytes: 1 << 20,
		Prelude: "import time\ntime.sleep(60)"}, drv, st, gov)
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	v, err := m.Create(ctx, p, CreateRequest{Lifetime: 2 * time.Second, NoPool: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err := m.Python(ctx, p, v.ID, PythonRequest{Cells: []PythonCell{{Code: "1"}}, Timeout: 30 * time.Second}, nil)
	want := v.ID + " reached the end of its lifetime (2 seconds) while the call ran"
	if !errors.Is(err, ErrGone) || !strings.Contains(err.Error(), want) {
		t.Fatalf("python in a computer whose lifetime ran out: %+v %v", res, err)
	}
}
