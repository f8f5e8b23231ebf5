package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cubicle-sandbox/cubicle/internal/client"
)

func TestAPIConfigValidate(t *testing.T) {
	ok := APIConfig{N: 200, Warmup: 3, Concurrency: 50, Execs: 100, PoolSize: 4}
	if err := ok.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	withURL := ok
	withURL.URL, withURL.Key = "http://127.0.0.1:8080", "cub_x"
	if err := withURL.Validate(); err != nil {
		t.Fatalf("with --url: %v", err)
	}
	noLoad := ok
	noLoad.Concurrency, noLoad.Execs = 0, 0
	if err := noLoad.Validate(); err != nil {
		t.Fatalf("--concurrency 0: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*APIConfig)
		want string
	}{
		{"url without key", func(c *APIConfig) { c.URL = "http://127.0.0.1:8080" }, "--url and --key"},
		{"key without url", func(c *APIConfig) { c.Key = "k" }, "--url and --key"},
		{"not http", func(c *APIConfig) { c.URL, c.Key = "ftp://x", "k" }, "--url"},
		{"no host", func(c *APIConfig) { c.URL, c.Key = "http://", "k" }, "--url"},
		{"with path", func(c *APIConfig) { c.URL, c.Key = "http://h:1/v1", "k" }, "without a path"},
		{"template without url", func(c *APIConfig) { c.Template = "debian" }, "--template needs --url"},
		{"n 0", func(c *APIConfig) { c.N = 0 }, "--n"},
		{"negative warmup", func(c *APIConfig) { c.Warmup = -1 }, "--warmup"},
		{"negative concurrency", func(c *APIConfig) { c.Concurrency = -1 }, "--concurrency"},
		{"huge concurrency", func(c *APIConfig) { c.Concurrency = 10001 }, "--concurrency"},
		{"execs 0 with load", func(c *APIConfig) { c.Execs = 0 }, "--execs"},
		{"negative timeout", func(c *APIConfig) { c.Timeout = -time.Second }, "--timeout"},
	} {
		c := ok
		tc.edit(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error naming %s", tc.name, err, tc.want)
		}
	}
}

func TestParsers(t *testing.T) {
	m := "# HELP cubicle_pool_depth x\n# TYPE cubicle_pool_depth gauge\ncubicle_pool_depth 3\ncubicle_pool_depth_other 9\n"
	if n, err := parsePoolDepth([]byte(m)); n != 3 || err != nil {
		t.Errorf("pool depth %d, %v", n, err)
	}
	if _, err := parsePoolDepth([]byte("up 1\n")); err == nil {
		t.Error("no pool depth: no error")
	}

	if a := listenAddr(`time=2026-11-30T00:00:00Z level=INFO msg=serving listen=127.0.0.1:41234 data=/tmp/x`); a != "127.0.0.1:41234" {
		t.Errorf("listen addr %q", a)
	}
	if a := listenAddr(`level=INFO msg=ready listen=127.0.0.1:1`); a != "" {
		t.Errorf("a ready line gave %q", a)
	}

	st, ppid, ok := parseStat("42 (cubicle agent) S 7 42 42 0 -1 4194560 100 0 0 0 11 22 33 44 20 0 5 0")
	if !ok || ppid != 7 || st.own != 33 || st.children != 77 {
		t.Errorf("stat: %+v ppid %d ok %v", st, ppid, ok)
	}
	a, ok1 := parseCPU("cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3\n")
	b, ok2 := parseCPU("cpu  250 0 100 850 50 0 0 0 0 0\n")
	if !ok1 || !ok2 || a.busy != 150 || a.idle != 850 {
		t.Fatalf("cpu %+v %v %v", a, ok1, ok2)
	}
	if got := b.busySince(a); got != 0.8 { // 200 busy of 250 ticks
		t.Errorf("busy %v, want 0.8", got)
	}

	mi := "36 25 0:32 / /tmp/a\\040b/serve/x rw - ext4 /dev/loop0 rw\n37 25 0:33 / /tmp/ab rw - tmpfs t rw\n"
	if mp := mountBelow(mi, "/tmp/a b/"); mp != "/tmp/a b/serve/x" {
		t.Errorf("mount below %q", mp)
	}
	if mp := mountBelow(mi, "/tmp/a"); mp != "" {
		t.Errorf("/tmp/ab is not below /tmp/a, got %q", mp)
	}
	if got := tail("one\ntwo\nthree\n", 8); got != "three" {
		t.Errorf("tail %q", got)
	}
}

func TestServerEnvDropsCallerOverrides(t *testing.T) {
	env := serverEnv([]string{"PATH=/bin", "CUBICLE_COMPUTERS_POOL_SIZE=0", "CUBICLE_ADMIN_KEY=theirs", "HOME=/root"},
		ServerConfig{PoolSize: 4, MaxConcurrent: 62, MemoryBudget: "64G"}, "cub_bench_k")
	joined := "\n" + strings.Join(env, "\n") + "\n"
	for _, want := range []string{"PATH=/bin", "HOME=/root", "CUBICLE_ADMIN_KEY=cub_bench_k", "CUBICLE_COMPUTERS_POOL_SIZE=4",
		"CUBICLE_COMPUTERS_MAX_CONCURRENT=62", "CUBICLE_COMPUTERS_MEMORY_BUDGET=64G"} {
		if !strings.Contains(joined, "\n"+want+"\n") {
			t.Errorf("env lacks %s: %q", want, env)
		}
	}
	if strings.Contains(joined, "=theirs") || strings.Contains(joined, "POOL_SIZE=0") {
		t.Errorf("env kept the caller's CUBICLE_ variables: %q", env)
	}
}

func TestAggregation(t *testing.T) {
	ms := func(f float64) Duration { return Duration(f * float64(time.Millisecond)) }
	rows := []Row{
		{ID: RowExecTrue, Summary: Summary{N: 5, P50: ms(1.9)}},
		{ID: RowExecEcho, Summary: Summary{N: 5, P50: ms(1.7)}},
		{ID: RowAPIExecTrue, Summary: Summary{N: 5, P50: ms(4.5)}},
		{ID: RowAPIExecEcho, Summary: Summary{N: 0}}, // failed entirely: no comparison
		{ID: RowAPICreate, Summary: Summary{N: 5, P50: ms(1.2)}},
	}
	o := overheads(rows)
	if len(o) != 1 || o[0].API != RowAPIExecTrue || o[0].Delta != ms(2.6) {
		t.Errorf("overheads %+v", o)
	}
	tg := targets(rows)
	got := map[string]bool{}
	for _, x := range tg {
		got[x.Row] = x.Met
	}
	want := map[string]bool{RowExecTrue: true, RowAPIExecTrue: false, RowAPICreate: true}
	if len(got) != len(want) {
		t.Errorf("targets %+v", tg)
	}
	for k, v := range want {
		if m, ok := got[k]; !ok || m != v {
			t.Errorf("target %s: met %v (present %v), want %v", k, m, ok, v)
		}
	}

	var notes []string
	lt := newLoadTally(func(f string, a ...any) { notes = append(notes, fmt.Sprintf(f, a...)) })
	lt.ok(RowLoadCreate, time.Millisecond)
	lt.fail(RowLoadCreate, &client.Error{Method: "POST", Path: "/v1/computers", Status: 429, Code: "capacity_exceeded"})
	lt.skip(3)
	for range 3 {
		lt.ok(RowLoadExecTrue, 2*time.Millisecond)
	}
	lt.fail(RowLoadExecTrue, errors.New("boom"))
	lt.fail(RowLoadExecTrue, errors.New("boom"))
	l := lt.result(2, 3, time.Second, nil)
	if l.Errors != 3 || l.Refused != 1 || l.Skipped != 3 || l.Execs != 3 || l.Throughput != 3 || l.OK {
		t.Errorf("load %+v", l)
	}
	if l.Rows[0].Failures != 1 || l.Rows[1].Failures != 2 || l.Rows[1].N != 3 {
		t.Errorf("load rows %+v", l.Rows)
	}
	if len(notes) != 2 { // the second "boom" is not noted again
		t.Errorf("notes %q", notes)
	}
	lt = newLoadTally(func(string, ...any) {})
	lt.ok(RowLoadExecTrue, time.Millisecond)
	if l := lt.result(1, 1, time.Second, nil); !l.OK {
		t.Errorf("a clean load is not OK: %+v", l)
	}
}

func TestRunAPIAgainstFakeServer(t *testing.T) {
	f := &fakeServer{full: 2}
	srv := newFakeServer(t, f)
	rep, err := RunAPI(context.Background(), APIConfig{URL: srv.URL, Key: "k", N: 5, Warmup: 1,
		Concurrency: 4, Execs: 3, PoolSize: -1, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed || rep.Server.PoolSize != 2 {
		t.Errorf("failed %v, pool %d, notes %q", rep.Failed, rep.Server.PoolSize, rep.Notes)
	}
	var ids []string
	for _, r := range rep.Rows {
		ids = append(ids, r.ID)
		if r.N != 5 || r.Failures != 0 {
			t.Errorf("row %+v", r)
		}
	}
	if want := []string{RowAPICreate, RowAPIDelete, RowAPIExecTrue, RowAPIExecEcho, RowAPIExecIdle}; !slices.Equal(ids, want) {
		t.Errorf("rows %v, want %v", ids, want)
	}
	l := rep.Load
	if l == nil || !l.OK || l.Execs != 12 || l.Errors != 0 || l.Rows[0].N != 4 || l.Rows[2].N != 4 {
		t.Fatalf("load %+v", l)
	}
	if len(rep.Targets) != 3 || rep.Targets[2].Row != RowAPIExecIdle {
		t.Errorf("targets %+v", rep.Targets)
	}
	if n := f.alive(); n != 0 {
		t.Errorf("%d computers left alive", n)
	}
	var b strings.Builder
	if err := WriteAPITable(&b, rep); err != nil || !strings.Contains(b.String(), "api      POST /v1/computers (warm pool)") ||
		!strings.Contains(b.String(), "throughput") {
		t.Errorf("table: %v\n%s", err, b.String())
	}
	if _, err := json.Marshal(rep); err != nil {
		t.Error(err)
	}
}

// With --template, the template's create and delete rows are timed as
// often as the default's, and only their creates name the template.
func TestRunAPITemplateRows(t *testing.T) {
	f := &fakeServer{full: 2}
	srv := newFakeServer(t, f)
	rep, err := RunAPI(context.Background(), APIConfig{URL: srv.URL, Key: "k", N: 4, Warmup: 1,
		PoolSize: -1, Template: "debian", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range rep.Rows {
		ids = append(ids, r.ID)
		if r.N != 4 || r.Failures != 0 {
			t.Errorf("row %+v", r)
		}
	}
	if want := []string{RowAPICreate, RowAPIDelete, RowAPIExecTrue, RowAPIExecEcho, RowAPIExecIdle, RowAPITemplateCreate, RowAPITemplateDelete}; !slices.Equal(ids, want) {
		t.Errorf("rows %v, want %v", ids, want)
	}
	f.mu.Lock()
	n := f.templateCreates["debian"]
	f.mu.Unlock()
	if n != 5 || len(f.templateCreates) != 1 {
		t.Errorf("template creates %v, want 5 of debian (4 timed, 1 warm-up)", f.templateCreates)
	}
	var b strings.Builder
	if err := WriteAPITable(&b, rep); err != nil || !strings.Contains(b.String(), "api      POST /v1/computers (warm pool, template debian)") {
		t.Errorf("table: %v\n%s", err, b.String())
	}
	// The longer labels widen the label column: every row's p50 ends
	// where the header's does.
	end := -1
	for _, line := range strings.Split(b.String(), "\n") {
		r := []rune(line)
		if strings.HasPrefix(line, "ms ") {
			end = utf8.RuneCountInString(line[:strings.Index(line, "p50")]) + 3
		}
		if end > 0 && strings.HasPrefix(line, "api ") && (len(r) <= end || r[end] != ' ' || r[end-1] < '0' || r[end-1] > '9') {
			t.Errorf("row not aligned with the header (p50 ends at %d):\n%s", end, b.String())
		}
	}
	if n := f.alive(); n != 0 {
		t.Errorf("%d computers left alive", n)
	}
}

func TestRunAPILoadCounts429(t *testing.T) {
	f := &fakeServer{full: 1, max: 3}
	srv := newFakeServer(t, f)
	rep, err := RunAPI(context.Background(), APIConfig{URL: srv.URL, Key: "k", N: 2,
		Concurrency: 5, Execs: 2, PoolSize: 1, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	l := rep.Load
	if !rep.Failed || l.OK || l.Refused != 2 || l.Errors != 2 || l.Execs != 6 || l.Skipped != 4 {
		t.Errorf("failed %v, load %+v", rep.Failed, l)
	}
	if n := f.alive(); n != 0 {
		t.Errorf("%d computers left alive", n)
	}
}

func TestRunAPICancelledCleansUp(t *testing.T) {
	f := &fakeServer{full: 1, blockAt: 40, blocked: make(chan struct{})}
	srv := newFakeServer(t, f)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-f.blocked // an exec in the load phase hangs
		cancel()
	}()
	rep, err := RunAPI(ctx, APIConfig{URL: srv.URL, Key: "k", N: 5,
		Concurrency: 8, Execs: 50, PoolSize: 1, Timeout: 5 * time.Second})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("RunAPI = %v, want context.Canceled", err)
	}
	if rep == nil || rep.CleanupFailed {
		t.Errorf("report %+v", rep)
	}
	if n := f.alive(); n != 0 {
		t.Errorf("%d computers left alive after cancel", n)
	}
}

func TestRunAPIBadKey(t *testing.T) {
	srv := newFakeServer(t, &fakeServer{full: 1})
	_, err := RunAPI(context.Background(), APIConfig{URL: srv.URL, Key: "wrong", N: 1, Timeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("RunAPI with a bad key = %v", err)
	}
}
