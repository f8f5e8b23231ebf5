package computer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/sandboxtest"
	"github.com/cubicle-sandbox/cubicle/internal/store"
	"github.com/cubicle-sandbox/cubicle/internal/store/sqlite"
	"github.com/cubicle-sandbox/cubicle/internal/tools"
)

// fakeDriver is sandboxtest's Driver with the hooks the manager's tests
// use to reach its interleavings deterministically. Its computers answer
// every call as a healthy agent does, unless a hook says otherwise.
type fakeDriver struct {
	sandboxtest.Driver
	gcCalls atomic.Int32
	// createHook, when set, runs in Create; an error fails the create.
	createHook func(ctx context.Context) error
	// killHook, when set, runs in Kill (once per computer).
	killHook func(sb *sandboxtest.Sandbox)
	// killErr, when set, is the result of the n-th (from 1) Kill.
	killErr func(n int32) error
	// destroyHook, when set, runs in Destroy (once per computer).
	destroyHook func(sb *sandboxtest.Sandbox)
	// destroyErr, when set, is the result of the n-th (from 1) Destroy.
	destroyErr func(n int32) error
	// execHook, when set, answers Exec.
	execHook func(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExitStatus, error)
	// listProcs, when set, answers ListProcesses.
	listProcs func() ([]sandbox.ProcessInfo, error)

	once sync.Once
}

func (d *fakeDriver) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	d.once.Do(func() { d.New = d.script })
	return d.Driver.Create(ctx, spec)
}

func (d *fakeDriver) GC(ctx context.Context) (sandbox.GCReport, error) {
	d.gcCalls.Add(1)
	return d.Driver.GC(ctx)
}

// script makes one computer that answers through d's hooks.
func (d *fakeDriver) script(ctx context.Context, spec sandbox.Spec) (*sandboxtest.Sandbox, error) {
	if d.createHook != nil {
		if err := d.createHook(ctx); err != nil {
			return nil, err
		}
	}
	sb := &sandboxtest.Sandbox{
		WriteFileFunc: func(ctx context.Context, req sandbox.FileWrite, r io.Reader) (sandbox.Written, error) {
			n, err := io.Copy(io.Discard, r)
			return sandbox.Written{Path: req.Path, Bytes: n}, err
		},
		ReadFileFunc: func(context.Context, sandbox.FileRead, io.Writer) (sandbox.DataEnd, error) {
			return sandbox.DataEnd{}, nil
		},
		StatFunc: func(ctx context.Context, path string) (sandbox.FileInfo, error) {
			return sandbox.FileInfo{Path: path, Type: "file"}, nil
		},
		ListFunc:   func(context.Context, string) (sandbox.Listing, error) { return sandbox.Listing{}, nil },
		MkdirFunc:  func(context.Context, string, bool) error { return nil },
		RemoveFunc: func(context.Context, string, bool) error { return nil },
		PythonFunc: func(context.Context, sandbox.PythonRequest, func(sandbox.PythonOutput)) (sandbox.PythonResult, error) {
			return sandbox.PythonResult{Status: "ok", FailedCell: -1}, nil
		},
		PythonControlFunc: func(context.Context, string) error { return nil },
		OpenKernelFunc:    func(context.Context, sandbox.KernelStart) (sandbox.Kernel, error) { return nil, sandbox.ErrUnsupported },
	}
	sb.ExecFunc = func(ctx context.Context, req sandbox.ExecRequest, sio sandbox.ExecIO) (sandbox.ExitStatus, error) {
		if d.execHook != nil {
			return d.execHook(ctx, req)
		}
		return sandbox.ExitStatus{}, nil
	}
	if d.listProcs != nil {
		sb.ListProcessesFunc = func(context.Context) ([]sandbox.ProcessInfo, error) { return d.listProcs() }
	}
	sb.KillFunc = func(context.Context) error {
		n := sb.Kills.Load()
		if n == 1 && d.killHook != nil {
			d.killHook(sb)
		}
		if d.killErr != nil {
			return d.killErr(n)
		}
		return nil
	}
	sb.DestroyFunc = func(context.Context) error {
		n := sb.Destroys.Load()
		if n == 1 && d.destroyHook != nil {
			d.destroyHook(sb)
		}
		if d.destroyErr != nil {
			return d.destroyErr(n)
		}
		return nil
	}
	return sb, nil
}

// fixture is a manager on a fake driver and a real SQLite store.
type fixture struct {
	t   *testing.T
	st  *sqlite.DB
	gov *governance.Service
	drv *fakeDriver
	mgr *computer.Manager
	p   governance.Principal
}

func baseConfig() computer.Config {
	return computer.Config{Memory: 256 << 20, Pids: 64, CPUs: 1, Disk: 64 << 20, Lifetime: 600 * time.Second,
		ExecTimeout: 30 * time.Second, MaxConcurrent: 8, MemoryBudget: 8 << 30, PoolSize: 0,
		MaxFileBytes: 1 << 20, MaxOutputBytes: 1 << 20}
}

const adminSecret = "cub_computer_test_admin_01"

// newFixture opens a store at dir (a new one when empty) and starts a
// manager on drv.
func newFixture(t *testing.T, dir string, drv *fakeDriver, tweak func(*computer.Config)) *fixture {
	t.Helper()
	return newFixtureOf(t, dir, drv, drv, tweak)
}

// newFixtureOf is newFixture with the manager on d, a driver around drv.
func newFixtureOf(t *testing.T, dir string, drv *fakeDriver, d sandbox.Driver, tweak func(*computer.Config)) *fixture {
	t.Helper()
	ctx := context.Background()
	if dir == "" {
		dir = t.TempDir()
	}
	st, err := sqlite.Open(ctx, filepath.Join(dir, "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	gov := governance.New(st)
	if _, err := gov.Bootstrap(ctx, adminSecret); err != nil {
		t.Fatal(err)
	}
	p, err := gov.Authenticate(ctx, adminSecret)
	if err != nil {
		t.Fatal(err)
	}
	cfg := baseConfig()
	if tweak != nil {
		tweak(&cfg)
	}
	mgr := computer.New(cfg, d, st, gov)
	if err := mgr.Start(ctx); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, st: st, gov: gov, drv: drv, mgr: mgr, p: p}
	t.Cleanup(func() {
		mgr.Close(context.Background())
		st.Close()
	})
	return f
}

func (f *fixture) usage(id string) []store.UsageRow {
	f.t.Helper()
	rows, err := f.st.Usage().List(context.Background(), store.UsageFilter{OrgID: f.p.Org.ID})
	if err != nil {
		f.t.Fatal(err)
	}
	var out []store.UsageRow
	for _, r := range rows {
		if r.ComputerID == id {
			out = append(out, r)
		}
	}
	return out
}

func (f *fixture) events(id, typ string) []store.Event {
	f.t.Helper()
	f.gov.FlushAudit()
	evs, err := f.st.Audit().List(context.Background(), store.EventFilter{OrgID: f.p.Org.ID, Type: typ})
	if err != nil {
		f.t.Fatal(err)
	}
	var out []store.Event
	for _, e := range evs {
		if e.ComputerID == id {
			out = append(out, e)
		}
	}
	return out
}

// blockingKill makes Kill signal started and wait for release.
func blockingKill(drv *fakeDriver) (started chan string, release chan struct{}) {
	started, release = make(chan string, 16), make(chan struct{})
	drv.killHook = func(sb *sandboxtest.Sandbox) {
		started <- sb.ID()
		<-release
	}
	return started, release
}

// blockingDestroy makes Destroy (the background cleanup) signal started
// and wait for release.
func blockingDestroy(drv *fakeDriver) (started chan string, release chan struct{}) {
	started, release = make(chan string, 16), make(chan struct{})
	drv.destroyHook = func(sb *sandboxtest.Sandbox) {
		started <- sb.ID()
		<-release
	}
	return started, release
}

// TestConcurrentDeleteOneWins: of two DELETEs of one computer, one stops it
// (204) and the other finds it already gone (409), as the contract says —
// not two successes, and not 503 "cannot be reached".
func TestConcurrentDeleteOneWins(t *testing.T) {
	drv := &fakeDriver{}
	started, release := blockingKill(drv)
	f := newFixture(t, "", drv, nil)
	v, err := f.mgr.Create(context.Background(), f.p, computer.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() { first <- f.mgr.Delete(context.Background(), f.p, v.ID) }()
	<-started // the first delete is tearing the computer down
	second := make(chan error, 1)
	go func() { second <- f.mgr.Delete(context.Background(), f.p, v.ID) }()
	var err2 error
	select {
	case err2 = <-second:
	case <-time.After(200 * time.Millisecond):
		// Waiting for the first delete is acceptable; the answer must
		// still be 409.
		close(release)
		err2 = <-second
		release = nil
	}
	if release != nil {
		close(release)
	}
	if err := <-first; err != nil {
		t.Fatalf("first delete: %v", err)
	}
	if !errors.Is(err2, computer.ErrGone) {
		t.Fatalf("second delete during the first: %v, want ErrGone (409)", err2)
	}
	if n := len(f.usage(v.ID)); n != 1 {
		t.Fatalf("%d usage rows", n)
	}
}

// TestDeleteWhileReaperDestroysIsGone: a DELETE that arrives while the
// reaper is destroying an expired computer answers 409 (already gone), not
// 503 (cannot be reached, cleaned up later).
func TestDeleteWhileReaperDestroysIsGone(t *testing.T) {
	drv := &fakeDriver{}
	started, release := blockingKill(drv)
	defer close(release)
	f := newFixture(t, "", drv, nil)
	v, err := f.mgr.Create(context.Background(), f.p, computer.CreateRequest{Lifetime: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-started:
		if id != v.ID {
			t.Fatalf("reaper destroys %s, want %s", id, v.ID)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the reaper did not destroy an expired computer within 5 s")
	}
	err = f.mgr.Delete(context.Background(), f.p, v.ID)
	if !errors.Is(err, computer.ErrGone) {
		t.Fatalf("delete while the reaper destroys: %v, want ErrGone (409)", err)
	}
	if _, err := f.mgr.Exec(context.Background(), f.p, v.ID, computer.ExecRequest{Command: "true"}, nil); !errors.Is(err, computer.ErrGone) {
		t.Fatalf("exec while the reaper destroys: %v, want ErrGone (409)", err)
	}
}

// TestCreateFailureReleasesCapacity: a computer that fails to start gives
// its admission back and leaves no record.
func TestCreateFailureReleasesCapacity(t *testing.T) {
	var fail atomic.Bool
	fail.Store(true)
	drv := &fakeDriver{createHook: func(ctx context.Context) error {
		if fail.Load() {
			return errors.New("boom")
		}
		return nil
	}}
	f := newFixture(t, "", drv, func(c *computer.Config) { c.MaxConcurrent = 1 })
	for i := 0; i < 3; i++ {
		if _, err := f.mgr.Create(context.Background(), f.p, computer.CreateRequest{}); err == nil || errors.Is(err, computer.ErrCapacity) {
			t.Fatalf("create %d on a failing driver: %v", i, err)
		}
	}
	fail.Store(false)
	if _, err := f.mgr.Create(context.Background(), f.p, computer.CreateRequest{}); err != nil {
		t.Fatalf("create after failures: %v", err)
	}
	if _, err := f.mgr.Create(context.Background(), f.p, computer.CreateRequest{}); !errors.Is(err, computer.ErrCapacity) {
		t.Fatalf("second create at max_concurrent 1: %v, want ErrCapacity", err)
	}
	list, err := f.mgr.List(context.Background(), f.p, true, "")
	if err != nil || len(list) != 1 {
		t.Fatalf("records: %+v %v", list, err)
	}
	if s := f.mgr.Snapshot(); s.AdmissionsRefused != 1 {
		t.Fatalf("admissions refused %d, want 1", s.AdmissionsRefused)
	}
}

// TestAdmissionNeverWaits: while one computer is slow to start, another
// create beyond capacity is refused at once instead of queueing.
func TestAdmissionNeverWaits(t *testing.T) {
	gate := make(chan struct{})
	drv := &fakeDriver{createHook: func(ctx context.Context) error { <-gate; return nil }}
	f := newFixture(t, "", drv, func(c *computer.Config) { c.MaxConcurrent = 1 })
	done := make(chan error, 1)
	go func() {
		_, err := f.mgr.Create(context.Background(), f.p, computer.CreateRequest{})
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	_, err := f.mgr.Create(context.Background(), f.p, computer.CreateRequest{})
	if !errors.Is(err, computer.ErrCapacity) || time.Since(start) > 500*time.Millisecond {
		t.Fatalf("create beyond capacity: %v after %v", err, time.Since(start))
	}
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestRecoverStopsOrphansExactlyOnce: computers a crashed server left as
// alive in the store are stopped on start, with one usage row and one
// computer.destroyed event each, however often the server restarts.
func TestRecoverStopsOrphansExactlyOnce(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	drv := &fakeDriver{}
	f := newFixture(t, dir, drv, nil)
	v1, err := f.mgr.Create(ctx, f.p, computer.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	v2, err := f.mgr.Create(ctx, f.p, computer.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// A "crash": a second manager starts on the same store while the first
	// never recorded a stop.
	for round := 0; round < 3; round++ {
		drv2 := &fakeDriver{}
		g := newFixture(t, dir, drv2, nil)
		if drv2.gcCalls.Load() != 1 {
			t.Fatalf("round %d: driver GC ran %d times on start", round, drv2.gcCalls.Load())
		}
		for _, id := range []string{v1.ID, v2.ID} {
			got, err := g.mgr.Get(ctx, g.p, id)
			if err != nil || got.Status != store.StatusDestroyed || got.StoppedAt == nil {
				t.Fatalf("round %d: %s after recovery: %+v %v", round, id, got, err)
			}
			if rows := g.usage(id); len(rows) != 1 || rows[0].Kind != "sandbox_seconds" || rows[0].KeyID != g.p.Key.ID {
				t.Fatalf("round %d: usage of %s: %+v", round, id, rows)
			}
			evs := g.events(id, "computer.destroyed")
			if len(evs) != 1 || string(evs[0].Data) == "" {
				t.Fatalf("round %d: computer.destroyed of %s: %+v", round, id, evs)
			}
		}
	}
}

// TestCloseStopsEverything: Close destroys every live and pooled computer
// exactly once and records the live ones' usage.
func TestCloseStopsEverything(t *testing.T) {
	ctx := context.Background()
	drv := &fakeDriver{}
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	gov := governance.New(st)
	gov.Bootstrap(ctx, adminSecret)
	p, _ := gov.Authenticate(ctx, adminSecret)
	cfg := baseConfig()
	cfg.PoolSize = 2
	mgr := computer.New(cfg, drv, st, gov)
	if err := mgr.Start(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for mgr.Snapshot().PoolDepth < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	a, err := mgr.Create(ctx, p, computer.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := mgr.Create(ctx, p, computer.CreateRequest{MemoryMB: 64})
	if err != nil {
		t.Fatal(err)
	}
	mgr.Close(ctx)
	for _, sb := range drv.Sandboxes() {
		if n := sb.Destroys.Load(); n != 1 {
			t.Errorf("%s destroyed %d times", sb.ID(), n)
		}
	}
	rows, _ := st.Usage().List(ctx, store.UsageFilter{OrgID: p.Org.ID})
	if len(rows) != 2 {
		t.Fatalf("usage rows after close: %+v", rows)
	}
	for _, id := range []string{a.ID, b.ID} {
		got, err := st.Computers().Get(ctx, p.Org.ID, id)
		if err != nil || got.Status != store.StatusDestroyed {
			t.Fatalf("%s after close: %+v %v", id, got, err)
		}
	}
}

// TestPoolNeverHandsOutTwice: under concurrent creates every computer is
// handed to exactly one caller, pooled or cold.
func TestPoolNeverHandsOutTwice(t *testing.T) {
	drv := &fakeDriver{}
	f := newFixture(t, "", drv, func(c *computer.Config) { c.PoolSize = 4; c.MaxConcurrent = 64; c.MemoryBudget = 64 << 30 })
	deadline := time.Now().Add(5 * time.Second)
	for f.mgr.Snapshot().PoolDepth < 4 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[string]int{}
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := f.mgr.Create(context.Background(), f.p, computer.CreateRequest{})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			seen[v.ID]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(seen) != 40 {
		t.Fatalf("40 creates got %d distinct computers: %v", len(seen), seen)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("%s handed out %d times", id, n)
		}
	}
}

// TestExecTimeoutIsClamped: the process timeout sent to the computer is the
// smallest of the deployment's, the key's and the request's.
func TestExecTimeoutIsClamped(t *testing.T) {
	var got atomic.Int64
	drv := &fakeDriver{execHook: func(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExitStatus, error) {
		got.Store(int64(req.Timeout))
		return sandbox.ExitStatus{}, nil
	}}
	f := newFixture(t, "", drv, nil)
	ctx := context.Background()
	caps, err := governance.ParseCapabilities([]byte(`{"tooling":{"system_tools":["computer"]},"computer":{"exec_timeout_seconds":7}}`))
	if err != nil {
		t.Fatal(err)
	}
	_, secret, err := f.gov.CreateKey(ctx, f.p.Org.ID, "limited", caps)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := f.gov.Authenticate(ctx, secret)
	if err != nil {
		t.Fatal(err)
	}
	v, err := f.mgr.Create(ctx, kp, computer.CreateRequest{ExecTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if v.Limits.ExecTimeout != 7*time.Second {
		t.Fatalf("limits %+v", v.Limits)
	}
	for _, c := range []struct{ req, want int }{{0, 7}, {100, 7}, {3, 3}} {
		if _, err := f.mgr.Exec(ctx, kp, v.ID, computer.ExecRequest{Command: "true", Timeout: time.Duration(c.req) * time.Second}, nil); err != nil {
			t.Fatal(err)
		}
		if want := int64(time.Duration(c.want) * time.Second); got.Load() != want {
			t.Fatalf("timeout_seconds %d: sent %d, want %d", c.req, got.Load(), want)
		}
		args := fmt.Sprintf(`{"command":"true","timeout_seconds":%d}`, max(c.req, 1))
		if _, err := f.mgr.RunTool(ctx, kp, v.ID, tools.Default(), tools.ExecName, json.RawMessage(args)); err != nil {
			t.Fatal(err)
		}
		if want := int64(time.Duration(min(max(c.req, 1), 7)) * time.Second); got.Load() != want {
			t.Fatalf("exec tool timeout_seconds %d: sent %d, want %d", c.req, got.Load(), want)
		}
	}
}

// TestUnreachableDeleteIsCleanedUpLater: DELETE of a computer whose teardown
// fails answers 503, and the computer is then cleaned up later (the issue:
// "503 if it cannot be reached (then cleaned up later by the reaper)"): the
// teardown is retried, and its stop is recorded once.
func TestUnreachableDeleteIsCleanedUpLater(t *testing.T) {
	drv := &fakeDriver{killErr: func(n int32) error {
		if n == 1 {
			return errors.New("agent does not answer")
		}
		return nil
	}}
	f := newFixture(t, "", drv, nil)
	v, err := f.mgr.Create(context.Background(), f.p, computer.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.mgr.Delete(context.Background(), f.p, v.ID); !errors.Is(err, computer.ErrUnavailable) {
		t.Fatalf("delete with a failing teardown: %v, want ErrUnavailable (503)", err)
	}
	sb := drv.Sandboxes()[0]
	deadline := time.Now().Add(3 * time.Second)
	for sb.Destroys.Load() < 1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if k, d := sb.Kills.Load(), sb.Destroys.Load(); k < 2 || d != 1 {
		t.Fatalf("in 3 s after a failed delete: killed %d times, destroyed %d; it is never cleaned up", k, d)
	}
	for deadline := time.Now().Add(time.Second); len(f.usage(v.ID)) == 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(600 * time.Millisecond) // a further reaper tick adds nothing
	if rows := f.usage(v.ID); len(rows) != 1 {
		t.Fatalf("usage rows %+v", rows)
	}
	if got, err := f.mgr.Get(context.Background(), f.p, v.ID); err != nil || got.Status != store.StatusDestroyed {
		t.Fatalf("after the retried teardown: %+v %v", got, err)
	}
}
