package datastore_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/cubicle-sandbox/cubicle/internal/datastore"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/store"
	"github.com/cubicle-sandbox/cubicle/internal/store/postgres/pgtest"
)

var pg *pgtest.Server

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m, &pg)) }

// The fixture: the same orders in a SQLite file and a PostgreSQL schema.
var fixture = map[string][]string{
	"sqlite": {
		`CREATE TABLE orders (id INTEGER PRIMARY KEY, status TEXT NOT NULL, total DECIMAL(10,2), placed DATETIME, day DATE, doc BLOB, note TEXT)`,
		`INSERT INTO orders VALUES (1, 'paid', '12.50', '2026-01-05 10:30:00', '2026-01-05', x'00ff10', 'first')`,
		`INSERT INTO orders VALUES (2, 'open', '7.25', '2026-02-01 08:00:00', '2026-02-01', NULL, NULL)`,
		`INSERT INTO orders VALUES (3, 'paid', '100', '2026-03-09 23:59:59', '2026-03-09', x'01', 'a, "quoted" note')`,
	},
	"postgres": {
		`CREATE TABLE orders (id integer PRIMARY KEY, status text NOT NULL, total numeric(10,2), placed timestamptz, day date, doc bytea, note text)`,
		`INSERT INTO orders VALUES (1, 'paid', 12.50, '2026-01-05 10:30:00+00', '2026-01-05', '\x00ff10', 'first')`,
		`INSERT INTO orders VALUES (2, 'open', 7.25, '2026-02-01 08:00:00+00', '2026-02-01', NULL, NULL)`,
		`INSERT INTO orders VALUES (3, 'paid', 100, '2026-03-09 23:59:59+00', '2026-03-09', '\x01', 'a, "quoted" note')`,
	},
}

// source makes the fixture in a real database of the kind and returns
// its datastore configuration (named shop) and a writable handle.
func source(t *testing.T, kind string) (datastore.Source, *sql.DB) {
	t.Helper()
	var db *sql.DB
	var err error
	src := datastore.Source{Name: "shop"}
	if kind == "sqlite" {
		src.Path = filepath.Join(t.TempDir(), "shop.db")
		db, err = sql.Open("sqlite", src.Path)
	} else {
		src.DSN = pg.Schema(t)
		db, err = sql.Open("pgx", src.DSN)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, q := range fixture[kind] {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return src, db
}

func newService(t *testing.T, cfg datastore.Config) *datastore.Service {
	t.Helper()
	s, err := datastore.New(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

var anyone = governance.Principal{Org: store.Org{ID: "org_1"}}

func call(t *testing.T, s *datastore.Service, name, args string) (string, bool) {
	t.Helper()
	res := s.Answer(context.Background(), anyone, name, json.RawMessage(args))
	return res.Output, res.Failed
}

// TestAnswer: the tool's ordinary answer writes "a decimal number as text,
// a time as ISO 8601, bytes as [binary]", null as null, in both databases,
// and stops at max_rows with truncated.
func TestAnswer(t *testing.T) {
	want := map[string]string{
		"sqlite": `{"columns":["id","status","total","placed","day","doc","note"],"rows":[` +
			`[1,"paid","12.5","2026-01-05T10:30:00Z","2026-01-05","[binary]","first"],` +
			`[2,"open","7.25","2026-02-01T08:00:00Z","2026-02-01",null,null]],"row_count":2,"truncated":true}`,
		"postgres": `{"columns":["id","status","total","placed","day","doc","note"],"rows":[` +
			`[1,"paid","12.50","2026-01-05T10:30:00Z","2026-01-05","[binary]","first"],` +
			`[2,"open","7.25","2026-02-01T08:00:00Z","2026-02-01",null,null]],"row_count":2,"truncated":false}`,
	}
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			src, _ := source(t, kind)
			src.MaxRows = 2
			s := newService(t, datastore.Config{Datastores: []datastore.Source{src}})
			q := `{"sql":"SELECT id, status, total, placed, day, doc, note FROM orders ORDER BY id"}`
			if kind == "postgres" {
				q = `{"sql":"SELECT id, status, total, placed AT TIME ZONE 'UTC' AS placed, day, doc, note FROM orders WHERE id < 3 ORDER BY id"}`
			}
			out, failed := call(t, s, "shop__query", q)
			if failed || out != want[kind] {
				t.Fatalf("answer:\n%s\nwant:\n%s", out, want[kind])
			}
		})
	}
}
