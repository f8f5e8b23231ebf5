package storetest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// testEgressFilters: records come back per organisation, oldest first,
// filtered by computer, host (name or address) and opening time, in pages.
func testEgressFilters(t *testing.T, b Backend) {
	db, _ := b.open(t)
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	rec := func(org, cmp, name, addr string, at time.Duration) store.EgressRecord {
		return store.EgressRecord{OrgID: org, KeyID: "key_1", ComputerID: cmp, Proto: "tcp", Name: name, Addr: addr, Port: 443,
			Verdict: "allowed", Rule: "domain:" + name, Sent: 10, Received: 20, OpenedAt: t0.Add(at), ClosedAt: t0.Add(at + time.Second)}
	}
	batch := []store.EgressRecord{
		rec("org_1", "cmp_a", "pypi.org", "203.0.113.1", 0),
		rec("org_1", "cmp_b", "", "203.0.113.7", time.Minute),
		rec("org_2", "cmp_c", "pypi.org", "203.0.113.1", 2*time.Minute),
		rec("org_1", "cmp_a", "github.com", "198.51.100.3", 3*time.Minute),
	}
	if err := db.Egress().Record(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if err := db.Egress().Record(ctx, nil); err != nil {
		t.Fatalf("an empty batch: %v", err)
	}
	ids := func(f store.EgressFilter) []string {
		t.Helper()
		got, err := db.Egress().List(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range got {
			out = append(out, r.ComputerID+"/"+r.Name+"/"+r.Addr)
		}
		return out
	}
	check := func(what string, got []string, want ...string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", what, got, want)
		}
	}
	check("org_1", ids(store.EgressFilter{OrgID: "org_1"}), "cmp_a/pypi.org/203.0.113.1", "cmp_b//203.0.113.7", "cmp_a/github.com/198.51.100.3")
	check("computer", ids(store.EgressFilter{OrgID: "org_1", ComputerID: "cmp_a"}), "cmp_a/pypi.org/203.0.113.1", "cmp_a/github.com/198.51.100.3")
	check("host by name", ids(store.EgressFilter{OrgID: "org_1", Host: "github.com"}), "cmp_a/github.com/198.51.100.3")
	check("host by address", ids(store.EgressFilter{OrgID: "org_1", Host: "203.0.113.7"}), "cmp_b//203.0.113.7")
	check("another org's host", ids(store.EgressFilter{OrgID: "org_2", Host: "github.com"}))
	check("opened in a window", ids(store.EgressFilter{OrgID: "org_1", OpenedAfter: t0.Add(30 * time.Second), OpenedBefore: t0.Add(2 * time.Minute)}), "cmp_b//203.0.113.7")
	first, _ := db.Egress().List(ctx, store.EgressFilter{OrgID: "org_1", Limit: 2})
	if len(first) != 2 || first[0].Sent != 10 || first[0].Received != 20 || !first[0].ClosedAt.Equal(t0.Add(time.Second)) || first[0].Port != 443 {
		t.Fatalf("first page: %+v", first)
	}
	check("next page", ids(store.EgressFilter{OrgID: "org_1", Limit: 2, After: first[1].ID}), "cmp_a/github.com/198.51.100.3")
}
