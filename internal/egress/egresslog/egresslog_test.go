package egresslog_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/egress"
	"github.com/cubicle-sandbox/cubicle/internal/egress/egresslog"
	"github.com/cubicle-sandbox/cubicle/internal/store"
	"github.com/cubicle-sandbox/cubicle/internal/store/sqlite"
)

// TestWriterKeepsEveryRecord: records added fast are all stored (in
// batches) by Close, with their owner and address.
func TestWriterKeepsEveryRecord(t *testing.T) {
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w := egresslog.New(db.Egress(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	now := time.Now()
	for i := range 1000 {
		w.Add(egress.Record{Computer: "cmp_1", Org: "org_1", Key: "key_1", Proto: "tcp", Name: "pypi.org",
			Addr: netip.MustParseAddrPort("203.0.113.1:443"), Verdict: egress.Allowed, Sent: int64(i), Opened: now, Closed: now})
	}
	w.Close()
	got, err := db.Egress().List(context.Background(), store.EgressFilter{OrgID: "org_1", Limit: 1000})
	if err != nil || len(got) != 1000 || w.Dropped() != 0 {
		t.Fatalf("%d records kept, %d dropped, %v", len(got), w.Dropped(), err)
	}
	if r := got[999]; r.Addr != "203.0.113.1" || r.Port != 443 || r.KeyID != "key_1" || r.Sent != 999 {
		t.Errorf("last record: %+v", r)
	}
}

type refusing struct{}

func (refusing) Record(context.Context, []store.EgressRecord) error { return errors.New("disk full") }
func (refusing) List(context.Context, store.EgressFilter) ([]store.EgressRecord, error) {
	return nil, nil
}

// TestWriterCountsWhatItCannotKeep: a store that refuses a batch makes the
// records count as dropped, never vanish unnoticed.
func TestWriterCountsWhatItCannotKeep(t *testing.T) {
	w := egresslog.New(refusing{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for range 10 {
		w.Add(egress.Record{Computer: "cmp_1"})
	}
	w.Close()
	if w.Dropped() != 10 {
		t.Errorf("dropped %d, want 10", w.Dropped())
	}
}
