package egresslog

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/egress"
	"github.com/cubicle-sandbox/cubicle/internal/store"
)

const (
	batchSize  = 256
	batchEvery = 100 * time.Millisecond
	queueSize  = 8192
)

// Writer queues records and writes them in batches until Close.
type Writer struct {
	st      store.Egress
	log     *slog.Logger
	ch      chan store.EgressRecord
	dropped atomic.Int64
	once    sync.Once
	done    chan struct{}
}

// New starts a writer to st; problems are logged to l.
func New(st store.Egress, l *slog.Logger) *Writer {
	w := &Writer{st: st, log: l, ch: make(chan store.EgressRecord, queueSize), done: make(chan struct{})}
	go w.run()
	return w
}

// Add queues one record; it never blocks (a full queue counts it dropped).
func (w *Writer) Add(r egress.Record) {
	rec := store.EgressRecord{OrgID: r.Org, KeyID: r.Key, ComputerID: r.Computer, Proto: r.Proto, Name: r.Name,
		Verdict: r.Verdict, Rule: r.Rule, Error: r.Error, Sent: r.Sent, Received: r.Received,
		OpenedAt: r.Opened, ClosedAt: r.Closed}
	if r.Addr.IsValid() {
		rec.Addr, rec.Port = r.Addr.Addr().String(), int(r.Addr.Port())
	}
	select {
	case w.ch <- rec:
	default:
		if w.dropped.Add(1)%1000 == 1 {
			w.log.Error("egress log: queue full, records dropped", "dropped_total", w.dropped.Load())
		}
	}
}

// Dropped is how many records could not be kept.
func (w *Writer) Dropped() int64 { return w.dropped.Load() }

// Close writes what is queued and stops.
func (w *Writer) Close() {
	w.once.Do(func() { close(w.ch) })
	<-w.done
}

func (w *Writer) run() {
	defer close(w.done)
	tick := time.NewTicker(batchEvery)
	defer tick.Stop()
	batch := make([]store.EgressRecord, 0, batchSize)
	flush := func() {
		if len(batch) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.st.Record(ctx, batch); err != nil {
			w.dropped.Add(int64(len(batch)))
			w.log.Error("egress log: records not kept", "records", len(batch), "dropped_total", w.dropped.Load(), "err", err)
		}
		batch = batch[:0]
	}
	for {
		select {
		case r, ok := <-w.ch:
			if !ok {
				flush()
				return
			}
			if batch = append(batch, r); len(batch) >= batchSize {
				flush()
			}
		case <-tick.C:
			flush()
		}
	}
}
