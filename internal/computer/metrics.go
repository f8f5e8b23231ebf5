package computer

import (
	"sync"
	"time"
)

// ExecBuckets are the upper bounds (seconds) of the exec latency histogram.
var ExecBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}

// Metrics holds the exec latency histogram.
type Metrics struct {
	mu      sync.Mutex
	counts  []uint64 // per bucket, plus +Inf last
	sum     float64
	samples uint64
}

func (h *Metrics) observe(d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.counts == nil {
		h.counts = make([]uint64, len(ExecBuckets)+1)
	}
	s := d.Seconds()
	i := 0
	for i < len(ExecBuckets) && s > ExecBuckets[i] {
		i++
	}
	h.counts[i]++
	h.sum += s
	h.samples++
}

// Snapshot is what /metrics shows.
type Snapshot struct {
	ByState           map[string]int
	PoolDepth         int
	AdmissionsRefused int64
	AuditDropped      int64    // audit events given up (the disk stayed full)
	ExecBucketCounts  []uint64 // cumulative, aligned with ExecBuckets, then +Inf
	ExecSum           float64
	ExecCount         uint64
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
	s := Snapshot{ByState: map[string]int{"ready": running, "starting": int(m.starting.Load()), "stopping": stopping},
		PoolDepth:         m.pool.depth(),
		AdmissionsRefused: m.adm.refused.Load(), AuditDropped: m.gov.AuditDropped()}
	h := &m.metrics
	h.mu.Lock()
	defer h.mu.Unlock()
	s.ExecBucketCounts = make([]uint64, len(ExecBuckets)+1)
	var cum uint64
	for i := range s.ExecBucketCounts {
		if h.counts != nil {
			cum += h.counts[i]
		}
		s.ExecBucketCounts[i] = cum
	}
	s.ExecSum, s.ExecCount = h.sum, h.samples
	return s
}
