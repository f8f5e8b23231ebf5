package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/client"
	"github.com/cubicle-sandbox/cubicle/internal/computer"
)

// floodCell sends 150,000 one-byte stream messages (150 KB, under the
// 1 MiB output cap).
const floodCell = "import sys\nfor i in range(150000):\n    sys.stdout.write('x'); sys.stdout.flush()"

// floodText reports whether s is the flood's output. The kernel's iopub
// socket may drop a few messages on a loaded host (a PUB socket drops
// what its subscriber has not read in time), so most of it is enough.
func floodText(s string) bool {
	return len(s) >= 140000 && len(s) <= 150000 && strings.Trim(s, "x") == ""
}

// floodEvents reads a python call's event stream without keeping it (the
// test's heap is measured with the server's): how many events came, the
// last one's name and the text of the outputs.
func floodEvents(t *testing.T, body io.Reader) (events int, last, text string) {
	t.Helper()
	var b strings.Builder
	r := client.NewEventReader(body, 0, 0)
	for {
		ev, err := r.Next()
		if err == io.EOF {
			return events, last, b.String()
		}
		if err != nil {
			t.Fatalf("event stream after %d events: %v", events, err)
		}
		events, last = events+1, ev.Name
		var o struct {
			Output pyOutput `json:"output"`
		}
		if ev.Name == "output" && json.Unmarshal(ev.Data, &o) == nil {
			b.WriteString(o.Output.Text)
		}
	}
}

// peakHeap samples the live heap (after a GC) until stop is called, and
// returns the most it grew over the heap at the start.
func peakHeap() (stop func() uint64) {
	live := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	base := live()
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			if h := live(); h > base && h-base > peak.Load() {
				peak.Store(h - base)
			}
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return func() uint64 { close(done); wg.Wait(); return peak.Load() }
}

// TestPythonOutputFlood (issue 10 item 6): a cell of 150,000 one-byte
// stream messages answers, through the REST API, a few coalesced outputs
// in a small JSON answer, and over SSE events paced by time, not one per
// message; the server's live heap stays small meanwhile. The two calls
// run at once on two computers. Not parallel: the heap measured is the
// whole test process's.
func TestPythonOutputFlood(t *testing.T) {
	e := newEnv(t, func(c *computer.Config) { c.ExecTimeout = 5 * time.Minute })
	unary, streamed := e.create(e.admin, nil).ID, e.create(e.admin, nil).ID
	for _, id := range []string{unary, streamed} {
		e.python(e.admin, id, pyCode("1")) // the kernels start outside the measure
	}
	flood := pyCode(floodCell)
	flood["timeout_seconds"] = 300 // 150,000 messages take a while on a busy host

	stop := peakHeap()
	ch := e.pyStart(context.Background(), unary, flood)
	start := time.Now()
	sres := e.pythonSSE(context.Background(), e.admin, streamed, flood)
	defer sres.Body.Close()
	events, last, text := floodEvents(t, sres.Body)
	took := time.Since(start)
	a := pyWait(t, ch, 5*time.Minute, "the flood cell (JSON)")
	grew := stop()

	if a.err != nil || a.r.code != http.StatusOK {
		t.Fatalf("flood cell (JSON): %v %s", a.err, a.r)
	}
	var res pyResult
	a.r.json(t, &res)
	if res.Status != "ok" || len(res.Cells) != 1 {
		t.Fatalf("flood cell (JSON): status %q, %d cells, %q", res.Status, len(res.Cells), res.Message)
	}
	if !floodText(res.Cells[0].stdout()) {
		t.Errorf("flood cell (JSON): %d bytes of stdout in %d outputs", len(res.Cells[0].stdout()), len(res.Cells[0].Outputs))
	}
	if n := len(res.Cells[0].Outputs); n > 8 || len(a.r.body) > 1<<20 {
		t.Errorf("flood cell (JSON): %d outputs in a %d-byte answer, want a few coalesced ones", n, len(a.r.body))
	}

	if last != "result" || !floodText(text) {
		t.Errorf("flood cell (SSE): %d events, the last %q, %d bytes of text", events, last, len(text))
	}
	// Outputs are delivered at most every 50 ms, each delivery a few events.
	if most := int(took/(50*time.Millisecond)) + 10; events > most {
		t.Errorf("flood cell (SSE): %d events in %v, want at most %d (coalesced)", events, took, most)
	}
	if grew > 16<<20 {
		t.Errorf("the server's live heap grew %d MiB for two 150 KB floods", grew>>20)
	}
	t.Logf("JSON: %d outputs, %d bytes; SSE: %d events in %v; live heap growth %d KiB",
		len(res.Cells[0].Outputs), len(a.r.body), events, took, grew>>10)
}
