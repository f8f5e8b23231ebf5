package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// Backend opens one backend's stores for the suite.
type Backend struct {
	// Open opens the store of the data directory dir (its secrets key
	// file lives there): the same dir is the same database (a reopen), a
	// new one an empty, migrated database. The store is closed when the
	// test ends (closing it earlier too is fine).
	Open func(t *testing.T, dir string) store.Store
	// Exec runs a statement on the database of dir directly: rows the
	// store would never write (an altered row).
	Exec func(t *testing.T, dir, query string)
	// InClear lists what of the database of dir holds v in clear (files,
	// tables): nothing may hold a domain secret's value.
	InClear func(t *testing.T, dir, v string) []string
}

// Run runs every test of the suite against b, in parallel.
func Run(t *testing.T, b Backend) {
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, Backend)
	}{
		{"StopExactlyOnce", testStopExactlyOnce},
		{"ReopenKeepsData", testReopenKeepsData},
		{"PauseResumeUsage", testPauseResumeUsage},
		{"NotFound", testNotFound},
		{"Instances", testInstances},
		{"Paging", testPaging},
		{"PagingWhileWriting", testPagingWhileWriting},
		{"ComputersPage", testComputersPage},
		{"Volumes", testVolumes},
		{"Scripts", testScripts},
		{"Egress", testEgressFilters},
		{"ResponsesConversation", testResponsesConversation},
		{"ResponsesList", testResponsesList},
		{"ResponsesUnfinished", testResponsesUnfinished},
		{"ResponsesRunning", testResponsesRunning},
		{"OrgSecretsSealed", testOrgSecretsSealed},
		{"OrgSecretsKeyLostOrChanged", testOrgSecretsKeyLostOrChanged},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, b)
		})
	}
}

// open opens a new, empty store and returns it with its data directory.
func (b Backend) open(t *testing.T) (store.Store, string) {
	dir := t.TempDir()
	return b.Open(t, dir), dir
}

// seed creates org_1 with key_1 and a starting computer cmp_1.
func seed(t *testing.T, db store.Store) {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	if err := db.Orgs().Create(ctx, store.Org{ID: "org_1", Name: "one", AllowComputer: true, CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if err := db.Keys().Create(ctx, store.Key{ID: "key_1", OrgID: "org_1", Name: "k", Hash: "h1", Prefix: "cub_", CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if err := db.Computers().Create(ctx, store.Computer{ID: "cmp_1", OrgID: "org_1", KeyID: "key_1", Status: store.StatusStarting,
		CreatedAt: now, ExpiresAt: now.Add(time.Hour), Instance: "i"}); err != nil {
		t.Fatal(err)
	}
}
