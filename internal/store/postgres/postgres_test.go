package postgres_test

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cubicle-sandbox/cubicle/internal/store"
	"github.com/cubicle-sandbox/cubicle/internal/store/postgres"
	"github.com/cubicle-sandbox/cubicle/internal/store/postgres/pgtest"
	"github.com/cubicle-sandbox/cubicle/internal/store/storetest"
)

// srv is the test binary's one PostgreSQL server.
var srv *pgtest.Server

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m, &srv)) }

// databases maps a test's data directory to its database (a schema of
// the shared one), so opening the same directory again is a reopen.
var databases sync.Map

func url(t *testing.T, dir string) string {
	if u, ok := databases.Load(dir); ok {
		return u.(string)
	}
	u, _ := databases.LoadOrStore(dir, srv.Schema(t))
	return u.(string)
}

func open(t *testing.T, dir string) store.Store {
	t.Helper()
	db, err := postgres.Open(context.Background(), url(t, dir), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// connect connects to the database of dir for the rest of the test.
func connect(t *testing.T, dir string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(ctx) })
	return c
}

// exec runs a query on the database of dir directly.
func exec(t *testing.T, dir, q string, args ...any) pgx.Rows {
	t.Helper()
	rows, err := connect(t, dir).Query(context.Background(), q, args...)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestStore runs the backend-agnostic suite (internal/store/storetest)
// on PostgreSQL, as internal/store/sqlite does on SQLite.
func TestStore(t *testing.T) {
	storetest.Run(t, storetest.Backend{
		Open: open,
		Exec: func(t *testing.T, dir, q string) {
			rows := exec(t, dir, q)
			rows.Close()
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
		},
		// Every row of every table, as text.
		InClear: func(t *testing.T, dir, v string) []string {
			ctx := context.Background()
			c := connect(t, dir)
			rows, _ := c.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()`)
			tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil || len(tables) < 10 {
				t.Fatalf("tables %v: %v", tables, err)
			}
			var found []string
			for _, table := range tables {
				var n int
				if err := c.QueryRow(ctx, `SELECT COUNT(*) FROM `+pgx.Identifier{table}.Sanitize()+` t WHERE strpos(t::text, $1) > 0`, v).Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n > 0 {
					found = append(found, table)
				}
			}
			return found
		},
	})
}

// TestMigrationsMirrorSQLite: both backends have the same migrations, by
// number and name, so a schema change is made to both.
func TestMigrationsMirrorSQLite(t *testing.T) {
	names := func(dir string) []string {
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range ents {
			out = append(out, e.Name())
		}
		return out
	}
	pg, lite := names("migrations"), names("../sqlite/migrations")
	if !slices.Equal(pg, lite) || len(pg) < 14 {
		t.Fatalf("postgres migrations %v, sqlite's %v: want the same", pg, lite)
	}
	versions, err := postgres.Versions()
	if err != nil || len(versions) != len(pg) || versions[len(versions)-1] != mustAtoi(t, strings.SplitN(pg[len(pg)-1], "_", 2)[0]) {
		t.Fatalf("versions %v %v", versions, err)
	}
}

func mustAtoi(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestConcurrentOpen: servers starting together on one database migrate
// it once.
func TestConcurrentOpen(t *testing.T) {
	dir := t.TempDir()
	u := url(t, dir)
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			db, err := postgres.Open(ctx, u, dir)
			if err != nil {
				t.Error(err)
				return
			}
			t.Cleanup(func() { db.Close() })
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	rows := exec(t, dir, `SELECT COUNT(*) FROM schema_migrations`)
	n, err := pgx.CollectExactlyOneRow(rows, pgx.RowTo[int])
	if v, _ := postgres.Versions(); err != nil || n != len(v) {
		t.Fatalf("%d migrations recorded (%v), want %d", n, err, len(v))
	}
}

// TestOpenRefusesOtherURLs: a store URL that is not postgres:// is refused
// with a message that does not show the password.
func TestOpenRefusesOtherURLs(t *testing.T) {
	_, err := postgres.Open(context.Background(), "mysql://u:hunter2@db/x", t.TempDir())
	if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "not a postgres:// URL") {
		t.Fatalf("open: %v", err)
	}
	_, err = postgres.Open(context.Background(), "postgres://u:hunter2@/nodb?host=/nonexistent&connect_timeout=2", t.TempDir())
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("open of a server that is not there: %v", err)
	}
}
