package storetest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// testScripts: a script's name is taken per organisation (ErrConflict),
// another organisation's is not found, the bound on an organisation's
// scripts holds under concurrent creates, List leaves the source out,
// Replace keeps the creation time and counts the version, Delete once.
func testScripts(t *testing.T, b Backend) {
	db, _ := b.open(t)
	seed(t, db)
	ctx := context.Background()
	if err := db.Orgs().Create(ctx, store.Org{ID: "org_2", Name: "two", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().Truncate(time.Millisecond)
	sc := store.Script{OrgID: "org_1", Name: "report", Description: "d", InputSchema: []byte(`{"type":"object"}`),
		Interpreter: []string{"/usr/bin/python3", "-u"}, Source: "print(1)\n", TimeoutSeconds: 5, KeyID: "key_1",
		CreatedAt: t0, UpdatedAt: t0}
	ss := db.Scripts()
	if err := ss.Create(ctx, sc, 10); err != nil {
		t.Fatal(err)
	}
	if err := ss.Create(ctx, sc, 10); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a second script named report: %v, want ErrConflict", err)
	}
	got, err := ss.Get(ctx, "org_1", "report")
	if err != nil || got.Source != sc.Source || got.Version != 1 || !slices.Equal(got.Interpreter, sc.Interpreter) ||
		string(got.InputSchema) != `{"type":"object"}` || got.TimeoutSeconds != 5 || !got.CreatedAt.Equal(t0) {
		t.Fatalf("get: %+v %v", got, err)
	}
	if _, err := ss.Get(ctx, "org_2", "report"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another organisation's script: %v, want ErrNotFound", err)
	}
	sc2 := sc
	sc2.OrgID = "org_2"
	if err := ss.Create(ctx, sc2, 10); err != nil {
		t.Fatalf("the same name in another organisation: %v", err)
	}
	// Eight concurrent creates against a bound of 5 (one exists): 4 win.
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := sc
			c.Name = string(rune('a' + i))
			err := ss.Create(ctx, c, 5)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
			case !errors.Is(err, store.ErrTooMany):
				t.Errorf("create %s: %v", c.Name, err)
			}
		}()
	}
	wg.Wait()
	list, err := ss.List(ctx, "org_1")
	if err != nil || won != 4 || len(list) != 5 || list[4].Name != "report" || list[0].Source != "" || list[0].Description != "d" {
		t.Fatalf("%d creates won; list %+v %v", won, list, err)
	}
	up := sc
	up.Description, up.Source, up.Interpreter, up.UpdatedAt = "new", "print(2)\n", []string{"/bin/sh"}, t0.Add(time.Second)
	up.CreatedAt = t0.Add(time.Hour) // ignored
	got, err = ss.Replace(ctx, up)
	if err != nil || got.Version != 2 || got.Source != "print(2)\n" || got.Description != "new" || !got.CreatedAt.Equal(t0) ||
		!got.UpdatedAt.Equal(t0.Add(time.Second)) || !slices.Equal(got.Interpreter, []string{"/bin/sh"}) {
		t.Fatalf("replace: %+v %v", got, err)
	}
	up.Name = "absent"
	if _, err := ss.Replace(ctx, up); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("replace of no script: %v", err)
	}
	if err := ss.Delete(ctx, "org_1", "report"); err != nil {
		t.Fatal(err)
	}
	if err := ss.Delete(ctx, "org_1", "report"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if got, err := ss.Get(ctx, "org_2", "report"); err != nil || got.OrgID != "org_2" {
		t.Fatalf("the other organisation's script after the delete: %+v %v", got, err)
	}
}
