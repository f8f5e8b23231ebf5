package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/store"
	"github.com/cubicle-sandbox/cubicle/internal/store/sqlite"
	"github.com/cubicle-sandbox/cubicle/internal/store/storetest"
)

// dbPath is the database of a data directory, as cubicle serve names it.
func dbPath(dir string) string { return filepath.Join(dir, "cubicle.db") }

func open(t *testing.T, dir string) store.Store {
	t.Helper()
	db, err := sqlite.Open(context.Background(), dbPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// exec runs statements on the database of dir directly.
func exec(t *testing.T, dir string, queries ...string) {
	t.Helper()
	raw, err := sql.Open("sqlite", "file:"+dbPath(dir)+"?_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for _, q := range queries {
		if _, err := raw.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
}

// inFiles lists the files of the data directory dir (the database, its
// write-ahead log, the key file) that hold v.
func inFiles(t *testing.T, dir, v string) []string {
	t.Helper()
	var found []string
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err == nil && bytes.Contains(b, []byte(v)) {
			found = append(found, e.Name())
		}
	}
	return found
}

// TestStore runs the backend-agnostic suite (internal/store/storetest)
// on SQLite; internal/store/postgres runs the same on PostgreSQL.
func TestStore(t *testing.T) {
	storetest.Run(t, storetest.Backend{
		Open:    open,
		Exec:    func(t *testing.T, dir, q string) { exec(t, dir, q) },
		InClear: inFiles,
	})
}
