package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// testInstances: an instance advertises its URL; Owner finds the
// instance of a computer not yet stopped (ErrNotFound once it stopped);
// Lapsed lists the instances whose last beat is older than asked that
// still own a running computer, and no longer once it stopped; Live
// those that beat since.
func testInstances(t *testing.T, b Backend) {
	db, _ := b.open(t)
	seed(t, db) // cmp_1, starting, owned by "i"
	ctx := context.Background()
	t0 := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	if err := db.Instances().Advertise(ctx, "i", "http://10.0.0.1:8080", t0); err != nil {
		t.Fatal(err)
	}
	if err := db.Instances().Beat(ctx, "j", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	in, err := db.Instances().Owner(ctx, "cmp_1")
	if err != nil || in.ID != "i" || in.URL != "http://10.0.0.1:8080" || !in.LastSeen.Equal(t0) {
		t.Fatalf("owner %+v, %v", in, err)
	}
	if _, err := db.Instances().Owner(ctx, "cmp_x"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("owner of no computer: %v", err)
	}
	// A computer found by its metadata (a Kernel Gateway kernel's).
	if err := db.Computers().Create(ctx, store.Computer{ID: "cmp_k", OrgID: "org_1", KeyID: "key_1", Status: store.StatusReady,
		CreatedAt: t0, ExpiresAt: t0.Add(time.Hour), Instance: "i", Metadata: json.RawMessage(`{"jupyter_kernel_id":"k-1","x.y":"z"}`)}); err != nil {
		t.Fatal(err)
	}
	if id, in, err := db.Instances().OwnerByMetadata(ctx, "jupyter_kernel_id", "k-1"); err != nil || id != "cmp_k" || in.ID != "i" || in.URL != "http://10.0.0.1:8080" {
		t.Fatalf("owner by metadata: %q %+v, %v", id, in, err)
	}
	if id, _, err := db.Instances().OwnerByMetadata(ctx, "x.y", "z"); err != nil || id != "cmp_k" {
		t.Fatalf("owner by a metadata key with a dot: %q, %v", id, err)
	}
	for _, kv := range [][2]string{{"jupyter_kernel_id", "k-2"}, {"jupyter_kernel", "k-1"}} {
		if _, _, err := db.Instances().OwnerByMetadata(ctx, kv[0], kv[1]); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("owner by metadata %v: %v, want not found", kv, err)
		}
	}
	if err := db.Computers().Stop(ctx, store.Stop{ComputerID: "cmp_k", At: t0, Failure: "test"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.Instances().OwnerByMetadata(ctx, "jupyter_kernel_id", "k-1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("owner by metadata of a stopped computer: %v", err)
	}
	lapsed, err := db.Instances().Lapsed(ctx, t0.Add(time.Second))
	if err != nil || len(lapsed) != 1 || lapsed[0].ID != "i" {
		t.Fatalf("lapsed %+v, %v: want i alone (j owns nothing)", lapsed, err)
	}
	if lapsed, err := db.Instances().Lapsed(ctx, t0); err != nil || len(lapsed) != 0 {
		t.Fatalf("lapsed before its last beat: %+v, %v", lapsed, err)
	}
	if live, err := db.Instances().Live(ctx, t0.Add(time.Second)); err != nil || len(live) != 1 || live[0].ID != "j" {
		t.Fatalf("live since i's beat: %+v, %v: want j alone", live, err)
	}
	if live, err := db.Instances().Live(ctx, t0); err != nil || len(live) != 2 {
		t.Fatalf("live since its beat: %+v, %v: want i and j", live, err)
	}
	// A beat keeps the URL; a stop ends the ownership.
	if err := db.Instances().Beat(ctx, "i", t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if in, err := db.Instances().Owner(ctx, "cmp_1"); err != nil || in.URL != "http://10.0.0.1:8080" {
		t.Fatalf("after a beat: %+v, %v", in, err)
	}
	if err := db.Computers().Stop(ctx, store.Stop{ComputerID: "cmp_1", At: t0, Failure: "its server stopped"}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Instances().Owner(ctx, "cmp_1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("owner of a stopped computer: %v", err)
	}
	if lapsed, err := db.Instances().Lapsed(ctx, time.Now()); err != nil || len(lapsed) != 0 {
		t.Fatalf("lapsed after the stop: %+v, %v", lapsed, err)
	}
}
