package bench

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/sandboxtest"
)

// fakeDriver makes computers that answer Exec at once (echoArgv prints
// echoOutput); onExec, when set, is called first with the number of execs
// so far, and its error is the exec's.
func fakeDriver(onExec func(n int) error) *sandboxtest.Driver {
	var mu sync.Mutex
	execs := 0
	exec := func(ctx context.Context, req sandbox.ExecRequest, sio sandbox.ExecIO) (sandbox.ExitStatus, error) {
		mu.Lock()
		execs++
		n := execs
		mu.Unlock()
		if onExec != nil {
			if err := onExec(n); err != nil {
				return sandbox.ExitStatus{}, err
			}
		}
		if slices.Equal(req.Argv, echoArgv) && sio.Stdout != nil {
			sio.Stdout.Write([]byte(echoOutput))
		}
		return sandbox.ExitStatus{}, nil
	}
	return &sandboxtest.Driver{New: func(context.Context, sandbox.Spec) (*sandboxtest.Sandbox, error) {
		return &sandboxtest.Sandbox{ExecFunc: exec}, nil
	}}
}

func TestRunReportsEveryRowAndCleansUp(t *testing.T) {
	d := fakeDriver(nil)
	rep, err := Run(context.Background(), Config{Driver: d, Spec: sandbox.DefaultSpec(), N: 3, Warmup: 1})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range rep.Rows {
		ids = append(ids, r.ID)
		if r.N != 3 || r.Failures != 0 || r.P50 <= 0 {
			t.Errorf("row %s: %+v", r.ID, r)
		}
	}
	want := []string{RowColdStart, RowCreate, RowKill, RowDestroy, RowExecTrue, RowExecEcho, RowExecIdle, RowHost, RowHostTrue, RowHostIdle}
	if !slices.Equal(ids, want) {
		t.Errorf("rows %v, want %v", ids, want)
	}
	if len(rep.Targets) != 2 || rep.Failed {
		t.Errorf("targets %+v, failed %v", rep.Targets, rep.Failed)
	}
	if n := d.Live(); n != 0 {
		t.Errorf("%d computers were not destroyed", n)
	}
	// 4 cold starts (1 warm-up + 3) and 2 long-lived computers.
	if n := len(d.Sandboxes()); n != 6 {
		t.Errorf("created %d computers, want 6", n)
	}
	var b strings.Builder
	if err := WriteTable(&b, rep); err != nil || !strings.Contains(b.String(), "cubicle  cold start → first byte") {
		t.Errorf("table: %v\n%s", err, b.String())
	}
	if _, err := json.Marshal(rep); err != nil {
		t.Error(err)
	}
}

func TestRunCancelledCleansUp(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	d := fakeDriver(func(n int) error {
		if n == 10 {
			cancel()
			return context.Canceled
		}
		return nil
	})
	rep, err := Run(ctx, Config{Driver: d, Spec: sandbox.DefaultSpec(), N: 1000})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	if rep == nil || rep.CleanupFailed {
		t.Errorf("report %+v", rep)
	}
	if n := d.Live(); n != 0 {
		t.Errorf("%d computers were not destroyed after cancel", n)
	}
}

func TestRunFailingExecIsCountedAndDisables(t *testing.T) {
	var calls atomic.Int64
	d := fakeDriver(func(int) error { calls.Add(1); return errors.New("agent gone") })
	rep, err := Run(context.Background(), Config{Driver: d, Spec: sandbox.DefaultSpec(), N: 50})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Failed {
		t.Error("a failing cubicle path did not fail the report")
	}
	for _, r := range rep.Rows {
		if strings.HasPrefix(r.ID, "cubicle_") && (r.N != 0 || r.Failures != consecutiveFailures) {
			t.Errorf("row %s: n %d failures %d, want 0 and %d", r.ID, r.N, r.Failures, consecutiveFailures)
		}
	}
	// Three paths exec (cold start, exec, exec after idle), each until
	// its third failure in a row: 50 runs of each would be 150 calls.
	if n := calls.Load(); n > 3*(consecutiveFailures+3) {
		t.Errorf("disabled paths kept running: %d execs", n)
	}
	if n := d.Live(); n != 0 {
		t.Errorf("%d computers were not destroyed", n)
	}
}

func TestEditSpec(t *testing.T) {
	raw := []byte(`{"process":{"terminal":true,"user":{"uid":0,"gid":0},"args":["sh"],"cwd":"/"},
		"root":{"path":"rootfs"},"mounts":[{"destination":"/proc","type":"proc","source":"proc"},
		{"destination":"/sys","type":"sysfs","source":"sysfs"}],
		"linux":{"namespaces":[{"type":"pid"},{"type":"cgroup"}],"resources":{"devices":[{"allow":false,"access":"rwm"}]}}}`)
	spec := sandbox.DefaultSpec()
	out, err := editSpec(raw, "/b/rootfs", echoArgv, spec, []topDir{{"bin", "usr/bin"}, {"lib", ""}})
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Process struct {
			Terminal bool
			User     struct{ UID, GID int }
			Args     []string
			Cwd      string
		}
		Root   struct{ Path string }
		Mounts []struct{ Destination, Type, Source string }
		Linux  struct {
			Namespaces []struct{ Type string }
			Resources  struct {
				Devices []any
				Memory  struct{ Limit int64 }
				Pids    struct{ Limit int64 }
				CPU     struct{ Quota, Period int64 }
			}
		}
	}
	if err := json.Unmarshal(out, &c); err != nil {
		t.Fatal(err)
	}
	if c.Process.Terminal || c.Process.User.UID != 1000 || c.Process.User.GID != 1000 ||
		!slices.Equal(c.Process.Args, echoArgv) || c.Process.Cwd != "/workspace" || c.Root.Path != "/b/rootfs" {
		t.Errorf("process/root: %+v %+v", c.Process, c.Root)
	}
	var dests []string
	for _, m := range c.Mounts {
		dests = append(dests, m.Destination)
	}
	if !slices.Equal(dests, []string{"/proc", "/usr", "/lib", "/tmp", "/workspace"}) {
		t.Errorf("mounts %v", dests)
	}
	var ns []string
	for _, n := range c.Linux.Namespaces {
		ns = append(ns, n.Type)
	}
	if !slices.Equal(ns, []string{"pid", "mount", "network", "ipc", "uts"}) {
		t.Errorf("namespaces %v", ns)
	}
	r := c.Linux.Resources
	if len(r.Devices) != 1 || r.Memory.Limit != spec.MemoryBytes || r.Pids.Limit != spec.Pids || r.CPU.Quota != 100000 {
		t.Errorf("resources %+v", r)
	}
}

// With a template, the cold start rows are measured twice, side by side:
// on the host's runtime and on the template.
func TestRunWithTemplate(t *testing.T) {
	var mu sync.Mutex
	roots := map[string]int{}
	d := fakeDriver(nil)
	newSb := d.New
	d.New = func(ctx context.Context, spec sandbox.Spec) (*sandboxtest.Sandbox, error) {
		mu.Lock()
		roots[spec.Root.Image]++
		mu.Unlock()
		return newSb(ctx, spec)
	}
	root := sandbox.Root{Template: "debian", Image: "/images/debian.erofs"}
	rep, err := Run(context.Background(), Config{Driver: d, Spec: sandbox.DefaultSpec(), N: 2, Warmup: 0, Template: root})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range rep.Rows {
		ids = append(ids, r.ID)
	}
	want := []string{RowColdStart, RowCreate, RowKill, RowDestroy, RowTemplateColdStart, RowTemplateCreate,
		RowTemplateKill, RowTemplateDestroy, RowExecTrue, RowExecEcho, RowExecIdle, RowHost, RowHostTrue, RowHostIdle}
	if !slices.Equal(ids, want) {
		t.Errorf("rows %v, want %v", ids, want)
	}
	if roots[root.Image] != 2 || roots[""] != 4 {
		t.Errorf("computers by root: %v, want 2 on the template and 4 on the host", roots)
	}
}

func TestRunIdleCost(t *testing.T) {
	defer func(d time.Duration) { idleSettle = d }(idleSettle)
	idleSettle = time.Millisecond
	d := fakeDriver(nil)
	rep, err := Run(context.Background(), Config{Driver: d, Spec: sandbox.DefaultSpec(), N: 3, Idle: 7})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Idle == nil || rep.Idle.Computers != 7 || rep.Idle.Asked != 7 || rep.Idle.MemoryBytes != IdleMemory {
		t.Fatalf("idle report %+v", rep.Idle)
	}
	var got []string
	for _, r := range rep.Rows {
		if r.ID == RowExecAtOne || r.ID == RowExecAtN {
			got = append(got, r.ID)
			if r.N != 3 {
				t.Errorf("row %s: %+v", r.ID, r)
			}
		}
	}
	if !slices.Equal(got, []string{RowExecAtOne, RowExecAtN}) {
		t.Errorf("idle rows %v", got)
	}
	if n := d.Live(); n != 0 {
		t.Errorf("%d computers were not destroyed", n)
	}
	var b strings.Builder
	if err := WriteTable(&b, rep); err != nil || !strings.Contains(b.String(), "idle cost: 7 idle computers") ||
		!strings.Contains(b.String(), "exec /bin/true, 7 computers") {
		t.Errorf("table: %v\n%s", err, b.String())
	}
}
