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

	"github.com/cubicle-sandbox/cubicle/internal/client"
)

func TestPythonBody(t *testing.T) {
	var v struct {
		Cells []struct {
			Code  string  `json:"code"`
			Title *string `json:"title"`
		} `json:"cells"`
		Timeout *int `json:"timeout"`
	}
	pythonBody := func(code string, timeout int) []byte {
		b, _ := json.Marshal(pythonRequest(code, timeout))
		return b
	}
	if err := json.Unmarshal(pythonBody("1+1", 0), &v); err != nil || len(v.Cells) != 1 || v.Cells[0].Code != "1+1" ||
		v.Cells[0].Title != nil || v.Timeout != nil {
		t.Errorf("pythonBody(1+1, 0) = %s", pythonBody("1+1", 0))
	}
	if err := json.Unmarshal(pythonBody(firstCell, 120), &v); err != nil || v.Cells[0].Code != firstCell || v.Timeout == nil || *v.Timeout != 120 {
		t.Errorf("pythonBody(firstCell, 120) = %s", pythonBody(firstCell, 120))
	}
}

// describeText is df.describe() of range(100) as pandas prints it.
const describeText = "                a\ncount  100.000000\nmean    49.500000\nstd     29.011492\nmin      0.000000\n" +
	"25%     24.750000\n50%     49.500000\n75%     74.250000\nmax     99.000000"

func TestPythonAnswerCheck(t *testing.T) {
	parse := func(s string) client.PythonResult {
		var a client.PythonResult
		if err := json.Unmarshal([]byte(s), &a); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		return a
	}
	ok2 := `{"status":"ok","cells":[{"index":0,"status":"ok","execution_count":3,"outputs":[{"type":"execute_result","text":"2","mime":"text/plain","execution_count":3}]}],"cancelled":false,"timed_out":false,"duration_ms":4}`
	cases := []struct {
		name, answer string
		judge        func(string) bool
		err          string
	}{
		{"ok", ok2, isResult("2"), ""},
		{"wrong value", ok2, isResult("3"), `unexpected result "2"`},
		{"describe", fmt.Sprintf(`{"status":"ok","cells":[{"index":0,"status":"ok","outputs":[{"type":"stream","name":"stdout","text":"x"},{"type":"execute_result","text":%q,"mime":"text/plain"}]}]}`, describeText),
			firstCellOK, ""},
		{"error", `{"status":"error","failed_cell":0,"cells":[{"index":0,"status":"error","outputs":[{"type":"error","ename":"ModuleNotFoundError","evalue":"No module named 'pandas'"}]}]}`,
			firstCellOK, "ModuleNotFoundError: No module named 'pandas'"},
		{"timed out", `{"status":"error","cells":[{"index":0,"status":"cancelled","outputs":[]}],"cancelled":true,"timed_out":true,"message":"Command timed out after 30 seconds"}`,
			isResult("2"), "timed out"},
		{"cancelled", `{"status":"error","cells":[{"index":0,"status":"cancelled","outputs":[]}],"cancelled":true}`, isResult("2"), "cancelled"},
		{"no result", `{"status":"ok","cells":[{"index":0,"status":"ok","outputs":[{"type":"stream","name":"stdout","text":"2\n"}]}]}`,
			isResult("2"), "no execute_result"},
		{"no cells", `{"status":"ok","cells":[]}`, isResult("2"), "0 cells"},
	}
	for _, tc := range cases {
		err := checkPython(parse(tc.answer), tc.judge)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: check = %v, want %q", tc.name, err, tc.err)
		}
	}
	if firstCellOK("count 100") || firstCellOK("49.5") || !firstCellOK(describeText) {
		t.Error("firstCellOK judges wrongly")
	}
}

func TestSpread(t *testing.T) {
	for _, c := range []struct{ n, m int }{{100, 30}, {100, 100}, {10, 25}, {7, 0}, {1, 3}, {100, 1}} {
		total, runs := 0, 0
		for i := range c.n {
			k := spread(i, c.n, c.m)
			if k < 0 || k > c.m/c.n+1 {
				t.Errorf("spread(%d, %d, %d) = %d", i, c.n, c.m, k)
			}
			total += k
			if k > 0 {
				runs++
			}
		}
		if total != c.m {
			t.Errorf("n %d m %d: %d runs in all", c.n, c.m, total)
		}
		if c.m <= c.n && runs != c.m {
			t.Errorf("n %d m %d: runs in %d iterations, want %d", c.n, c.m, runs, c.m)
		}
	}
	// Spread evenly: 30 among 100 never has two in a row, nor a gap of 5.
	gap := 0
	for i := range 100 {
		if spread(i, 100, 30) == 0 {
			if gap++; gap > 3 {
				t.Fatalf("gap of %d at %d", gap, i)
			}
		} else {
			gap = 0
		}
	}
}

func TestPythonVerdicts(t *testing.T) {
	row := func(id string, p50 time.Duration) Row {
		return Row{ID: id, Summary: Summary{N: 10, P50: Duration(p50)}}
	}
	sp, _, ts := pythonVerdicts([]Row{
		row(RowPyOnePlusOne, 7*time.Millisecond), row(RowJupyterOnePlusOne, 49*time.Millisecond),
		row(RowPyFirstWarm, 60*time.Millisecond), row(RowPyFirstCold, 2400*time.Millisecond),
		row(RowPyFirstColdPlain, 510*time.Millisecond),
	})
	if len(sp) != 2 || sp[0].Ratio != 7 || !sp[0].Met || sp[0].Minimum != 5 || sp[1].Ratio != 40 || !sp[1].Met || sp[1].Minimum != 0 {
		t.Errorf("speedups %+v", sp)
	}
	// The cold pandas cell is not judged; the cold 1+1 is, against 500 ms.
	if len(ts) != 3 || !ts[0].Met || ts[0].Row != RowPyOnePlusOne || ts[1].Met || ts[1].Row != RowPyFirstWarm ||
		ts[2].Met || ts[2].Row != RowPyFirstColdPlain || ts[2].Limit != Duration(500*time.Millisecond) {
		t.Errorf("targets %+v", ts)
	}
	if _, _, ts := pythonVerdicts([]Row{row(RowPyFirstColdPlain, 490*time.Millisecond)}); len(ts) != 1 || !ts[0].Met {
		t.Errorf("cold 1+1 in 490 ms: targets %+v", ts)
	}
	sp, _, _ = pythonVerdicts([]Row{row(RowPyOnePlusOne, 12*time.Millisecond), row(RowJupyterOnePlusOne, 49*time.Millisecond)})
	if len(sp) != 1 || sp[0].Met {
		t.Errorf("4× judged as met: %+v", sp)
	}
	sp, _, ts = pythonVerdicts([]Row{row(RowKGWOnePlusOne, 8*time.Millisecond), row(RowJupyterOnePlusOne, 48*time.Millisecond)})
	if len(sp) != 1 || sp[0].Fast != RowKGWOnePlusOne || sp[0].Ratio != 6 || !sp[0].Met || sp[0].Minimum != 4 ||
		len(ts) != 1 || ts[0].Row != RowKGWOnePlusOne || !ts[0].Met {
		t.Errorf("kgw: speedups %+v targets %+v", sp, ts)
	}
	sp, ds, _ := pythonVerdicts([]Row{row(RowPyOnePlusOne, 7*time.Millisecond), row(RowJupyterQuickAck, 10*time.Millisecond),
		row(RowDriverOnePlusOne, 6500*time.Microsecond)})
	if len(sp) != 1 || sp[0].Slow != RowJupyterQuickAck || sp[0].Minimum != 0 || !sp[0].Met {
		t.Errorf("quick ACKs: speedups %+v", sp)
	}
	if len(ds) != 1 || ds[0].Met == nil || !*ds[0].Met || ds[0].Limit != Duration(time.Millisecond) {
		t.Errorf("API over the driver by 0.5 ms: %+v", ds)
	}
	if _, ds, _ := pythonVerdicts([]Row{row(RowPyOnePlusOne, 7*time.Millisecond), row(RowDriverOnePlusOne, 5900*time.Microsecond)}); len(ds) != 1 || ds[0].Met == nil || *ds[0].Met {
		t.Errorf("API over the driver by 1.1 ms judged met: %+v", ds)
	}
	if sp, _, _ := pythonVerdicts([]Row{row(RowPyOnePlusOne, 7*time.Millisecond)}); len(sp) != 0 {
		t.Errorf("a speedup without the jupyter row: %+v", sp)
	}
}

func TestPythonConfigValidate(t *testing.T) {
	good := PythonConfig{N: 10, FirstN: 3, Warmup: 1}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []PythonConfig{{N: 0}, {N: 1, FirstN: -1}, {N: 1, Warmup: -1}, {N: 1, Timeout: -1}} {
		if c.Validate() == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

func TestRunPythonAgainstFakeServers(t *testing.T) {
	warmF := &fakeServer{full: 2, coldDelay: 20 * time.Millisecond}
	coldF := &fakeServer{coldDelay: 20 * time.Millisecond}
	warm, cold := newFakeServer(t, warmF), newFakeServer(t, coldF)
	rep, err := RunPython(context.Background(), PythonConfig{
		Warm: PythonServer{URL: warm.URL, Key: "k", PoolSize: 2}, Cold: PythonServer{URL: cold.URL, Key: "k"},
		N: 10, FirstN: 4, Warmup: 2, Timeout: 5 * time.Second, FirstTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed || len(rep.Notes) != 0 {
		t.Errorf("failed %v, notes %q", rep.Failed, rep.Notes)
	}
	var ids []string
	for _, r := range rep.Rows {
		ids = append(ids, r.ID)
		want := 10
		if strings.HasPrefix(r.ID, "python_first_") || strings.HasPrefix(r.ID, "python_kernel_cpu") {
			want = 4
		}
		if r.N != want || r.Failures != 0 {
			t.Errorf("row %+v, want n %d", r, want)
		}
	}
	want := []string{RowPyOnePlusOne, RowPyOnePlusOneSSE, RowPyFirstWarm, RowPyFirstWarmCreate, RowPyFirstWarmCell,
		RowPyFirstWarmMem, RowPyFirstWarmMemCreate, RowPyFirstWarmMemCell,
		RowPyFirstPlotWarm, RowPyFirstPlotWarmCreate, RowPyFirstPlotWarmCell, RowPyKernelCPUPool,
		RowPyFirstCold, RowPyFirstColdCreate, RowPyFirstColdCell, RowPyKernelCPUCold,
		RowPyFirstColdPlain, RowPyFirstColdPlainCreate, RowPyFirstColdPlainCell, RowPyKernelCPUColdPlain}
	if !slices.Equal(ids, want) {
		t.Errorf("rows %v, want %v", ids, want)
	}
	byID := map[string]Row{}
	for _, r := range rep.Rows {
		byID[r.ID] = r
	}
	// The cold rows include the fake kernel start; the warm ones do not.
	if c, w := byID[RowPyFirstColdCell], byID[RowPyFirstWarm]; time.Duration(c.P50) < 20*time.Millisecond || time.Duration(w.P50) >= 20*time.Millisecond {
		t.Errorf("cold cell p50 %v, warm first cell p50 %v", c.P50, w.P50)
	}
	if all, cr, cell := byID[RowPyFirstCold], byID[RowPyFirstColdCreate], byID[RowPyFirstColdCell]; all.Min < cr.Min || all.Min < cell.Min {
		t.Errorf("the whole first cell is shorter than a part: %+v %+v %+v", all, cr, cell)
	}
	if c, p := byID[RowPyKernelCPUCold], byID[RowPyKernelCPUPool]; time.Duration(c.P50) != 500*time.Millisecond || time.Duration(p.P50) != 500*time.Millisecond {
		t.Errorf("kernel CPU rows: cold %v, pool %v; want the fake's 500 ms", c.P50, p.P50)
	}
	if c := byID[RowPyFirstColdPlainCell]; time.Duration(c.P50) < 20*time.Millisecond || time.Duration(byID[RowPyKernelCPUColdPlain].P50) != 500*time.Millisecond {
		t.Errorf("cold 1+1: cell %+v, kernel CPU %+v", c, byID[RowPyKernelCPUColdPlain])
	}
	if len(rep.Targets) != 4 || len(rep.Speedups) != 1 || rep.Speedups[0].Fast != RowPyFirstWarm {
		t.Errorf("targets %+v speedups %+v", rep.Targets, rep.Speedups)
	}
	if n := warmF.memoryCreates[firstCellMemoryMB]; n < 4 { // the timed runs, and warm-up
		t.Errorf("%d creates asked for memory_mb %d, want at least 4", n, firstCellMemoryMB)
	}
	if n, m := warmF.alive(), coldF.alive(); n != 0 || m != 0 {
		t.Errorf("%d and %d computers left alive", n, m)
	}
	if n := coldF.next; n != 10 { // per cell (pandas, 1+1) one warm-up and four timed first cells
		t.Errorf("%d computers on the cold server, want 10", n)
	}
	var b strings.Builder
	if err := WritePythonTable(&b, rep); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"cubicle  1+1  POST …/python (JSON)", "warm     new computer + first cell", "cold server:",
		"first cell: warm pool vs cold", "not judged (no jupyter_server row)", "first cell in a new computer (warm pool)",
		"cold     first cell, no pooled kernel", "warm     pool kernel CPU ms", "cold     first cell 1+1, no pooled kernel",
		"  first cell 1+1, no pooled kernel" + strings.Repeat(" ", 18) + " ≤ 500 ms p50"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, b.String())
		}
	}
	js, err := json.Marshal(rep)
	if err != nil || !strings.Contains(string(js), `"id":"python_1plus1"`) {
		t.Errorf("JSON %s (%v)", js, err)
	}
}

func TestRunPythonCancelledCleansUp(t *testing.T) {
	f := &fakeServer{full: 2, blockAt: 9, blocked: make(chan struct{})}
	srv := newFakeServer(t, f)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-f.blocked
		cancel()
	}()
	rep, err := RunPython(ctx, PythonConfig{Warm: PythonServer{URL: srv.URL, Key: "k", PoolSize: 2},
		N: 20, FirstN: 10, Warmup: 1, Timeout: 5 * time.Second, FirstTimeout: 5 * time.Second})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("RunPython = %v, want context.Canceled", err)
	}
	if rep == nil || rep.CleanupFailed {
		t.Errorf("report %+v", rep)
	}
	if n := f.alive(); n != 0 {
		t.Errorf("%d computers left alive after cancel", n)
	}
}

func TestRunPythonBadKeyAndNoJupyter(t *testing.T) {
	srv := newFakeServer(t, &fakeServer{full: 2})
	_, err := RunPython(context.Background(), PythonConfig{Warm: PythonServer{URL: srv.URL, Key: "wrong", PoolSize: 2}, N: 1})
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("RunPython with a bad key = %v", err)
	}
	// A Python without jupyter_server: the peer is a note, not a failure.
	rep, err := RunPython(context.Background(), PythonConfig{Warm: PythonServer{URL: srv.URL, Key: "k", PoolSize: 2}, N: 2,
		Jupyter: &JupyterConfig{Python: "/bin/false", Dir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed || rep.Jupyter != nil || len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], "jupyter_server is not installed") {
		t.Errorf("failed %v, jupyter %+v, notes %q", rep.Failed, rep.Jupyter, rep.Notes)
	}
}
