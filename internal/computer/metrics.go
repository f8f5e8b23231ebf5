package computer

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// DurationBuckets are the upper bounds (seconds) of the latency
// histograms (exec, python, tool calls).
var DurationBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}

// Tool call outcomes, as cubicle_tool_calls_total counts them.
const (
	OutcomeOK     = "ok"     // the tool ran and succeeded
	OutcomeFailed = "failed" // the tool ran and reported an error to the model (is_error)
	OutcomeError  = "error"  // the call did not complete: the computer was gone or unreachable, or the call was cancelled
)

// metrics are the manager's counters: one latency histogram per kind of
// call, and tool calls by tool and outcome.
type metrics struct {
	exec, python, tool histogram

	mu    sync.Mutex
	calls map[toolOutcome]uint64
}

type toolOutcome struct{ tool, outcome string }

func (m *metrics) toolCall(tool, outcome string, d time.Duration) {
	m.tool.observe(d)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.calls == nil {
		m.calls = map[toolOutcome]uint64{}
	}
	m.calls[toolOutcome{tool, outcome}]++
}

func (m *metrics) toolCalls() []ToolCalls {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]ToolCalls, 0, len(m.calls))
	for k, n := range m.calls {
		out = append(out, ToolCalls{Tool: k.tool, Outcome: k.outcome, Count: n})
	}
	slices.SortFunc(out, func(a, b ToolCalls) int {
		return cmp.Or(cmp.Compare(a.Tool, b.Tool), cmp.Compare(a.Outcome, b.Outcome))
	})
	return out
}

// histogram counts durations into DurationBuckets.
type histogram struct {
	mu      sync.Mutex
	counts  []uint64 // per bucket, plus +Inf last
	sum     float64
	samples uint64
}

func (h *histogram) observe(d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.counts == nil {
		h.counts = make([]uint64, len(DurationBuckets)+1)
	}
	s := d.Seconds()
	i := 0
	for i < len(DurationBuckets) && s > DurationBuckets[i] {
		i++
	}
	h.counts[i]++
	h.sum += s
	h.samples++
}

func (h *histogram) snapshot() Histogram {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := Histogram{Buckets: make([]uint64, len(DurationBuckets)+1), Sum: h.sum, Count: h.samples}
	var cum uint64
	for i := range out.Buckets {
		if h.counts != nil {
			cum += h.counts[i]
		}
		out.Buckets[i] = cum
	}
	return out
}

// Histogram is a latency histogram as /metrics shows it.
type Histogram struct {
	Buckets []uint64 // cumulative, aligned with DurationBuckets, then +Inf
	Sum     float64  // seconds
	Count   uint64
}

// ToolCalls counts the calls of one tool that ended one way.
type ToolCalls struct {
	Tool, Outcome string
	Count         uint64
}

// Snapshot is what /metrics shows.
type Snapshot struct {
	ByState           map[string]int
	PoolDepth         int
	AdmissionsRefused int64
	AuditDropped      int64     // audit events given up (the disk stayed full)
	Exec              Histogram // processes of the exec API
	Python            Histogram // calls of the python API
	ToolDuration      Histogram // tool calls (REST tool endpoints and the Responses gateway)
	ToolCalls         []ToolCalls
}

// Snapshot reads the current values.
func (m *Manager) Snapshot() Snapshot {
	m.mu.Lock()
	running, stopping := 0, 0
	for _, l := range m.live {
		if l.gone() {
			stopping++ // being killed, or its resources being freed
		} else {
			running++
		}
	}
	m.mu.Unlock()
	return Snapshot{ByState: map[string]int{"ready": running, "starting": int(m.starting.Load()), "stopping": stopping},
		PoolDepth:         m.poolDepth(),
		AdmissionsRefused: m.adm.refused.Load(), AuditDropped: m.gov.AuditDropped(),
		Exec: m.metrics.exec.snapshot(), Python: m.metrics.python.snapshot(),
		ToolDuration: m.metrics.tool.snapshot(), ToolCalls: m.metrics.toolCalls()}
}
