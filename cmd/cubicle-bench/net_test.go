package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/bench"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/testbin"
)

var cubicleBin string

func TestMain(m *testing.M) {
	os.Exit(testbin.Main(m, &cubicleBin))
}

// TestBenchNet runs 'cubicle-bench net' with tiny numbers: every row has
// its runs, and the computers, the test internet's namespace and the
// temporary directory are gone afterwards.
func TestBenchNet(t *testing.T) {
	data := t.TempDir()
	out, err := os.CreateTemp(t.TempDir(), "stdout")
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = out
	code := benchNet([]string{"--n", "2", "--warmup", "1", "--downloads", "1", "--size", "1M", "--timeout", "30s",
		"--data", data, "--cubicle", cubicleBin, "--json"})
	os.Stdout = stdout
	b, _ := os.ReadFile(out.Name())
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, b)
	}
	var rep bench.NetReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	want := map[string]int{bench.RowNetConnect: 2, bench.RowNetHostConnect: 2, bench.RowNetGet: 2, bench.RowNetHostGet: 2,
		bench.RowNetDNS: 2, bench.RowNetCreateNone: 2, bench.RowNetCreateInternet: 2, bench.RowNetAttach: 2, bench.RowNetDownload: 1, bench.RowNetHostDownload: 1}
	for _, r := range rep.Rows {
		if n, ok := want[r.ID]; !ok || r.N != n || r.Failures != 0 || r.P50 <= 0 {
			t.Errorf("row %+v", r)
		}
		delete(want, r.ID)
	}
	if len(want) > 0 || rep.Failed || len(rep.Throughput) != 2 || rep.CPU == nil || len(rep.Targets) != 3 || len(rep.Notes) > 0 {
		t.Errorf("missing rows %v; report %s", want, b)
	}
	if _, err := os.Stat(rep.Netns); rep.Netns == "" || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the test internet's namespace %q: %v", rep.Netns, err)
	}
	if left, _ := filepath.Glob(filepath.Join(data, "*")); len(left) > 0 {
		t.Errorf("left in --data: %v", left)
	}
}

// cancelOn cancels when the log says what.
type cancelOn struct {
	what   string
	cancel context.CancelFunc
}

func (c cancelOn) Write(p []byte) (int, error) {
	if strings.Contains(string(p), c.what) {
		c.cancel()
	}
	return len(p), nil
}

// TestBenchNetInterrupted: cancelled (Ctrl-C) while measuring, the bench
// still removes the computers, the namespace and the directory.
func TestBenchNetInterrupted(t *testing.T) {
	data := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := bench.NetConfig{Spec: sandbox.DefaultSpec(), N: 1000, Size: 1 << 20, Timeout: 30 * time.Second,
		Log: cancelOn{"measuring", cancel}}
	rep, err := runBenchNet(ctx, cfg, place{data: data, cubicle: cubicleBin})
	if !errors.Is(err, context.Canceled) || rep == nil || rep.CleanupFailed {
		t.Fatalf("runBenchNet = %v, report %+v", err, rep)
	}
	if _, err := os.Stat(rep.Netns); rep.Netns == "" || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the test internet's namespace %q: %v", rep.Netns, err)
	}
	if left, _ := filepath.Glob(filepath.Join(data, "*")); len(left) > 0 {
		t.Errorf("left in --data: %v", left)
	}
}
