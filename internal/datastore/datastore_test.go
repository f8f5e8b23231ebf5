package datastore_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
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

// TestReadOnly: whatever SQL the model writes, the datastore is not
// changed: writes, a second statement after COMMIT, ATTACH of another file
// and a pragma lifting query_only are all refused by the database.
func TestReadOnly(t *testing.T) {
	attacks := map[string][]string{
		"sqlite": {`DELETE FROM orders`, `INSERT INTO orders (id, status) VALUES (9, 'x')`,
			`ATTACH DATABASE '/tmp/other.db' AS other`, `PRAGMA query_only = 0`,
			`SELECT 1; DELETE FROM orders`, `CREATE TABLE x (a)`, `UPDATE orders SET status = 'x'`},
		"postgres": {`DELETE FROM orders`, `INSERT INTO orders (id, status) VALUES (9, 'x')`,
			`COMMIT; DELETE FROM orders`, `SET default_transaction_read_only = off; DELETE FROM orders`,
			`SELECT 1; DELETE FROM orders`, `CREATE TABLE x (a int)`, `UPDATE orders SET status = 'x'`,
			`WITH d AS (DELETE FROM orders RETURNING id) SELECT * FROM d`},
	}
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			src, db := source(t, kind)
			s := newService(t, datastore.Config{Datastores: []datastore.Source{src}})
			for _, q := range attacks[kind] {
				args, _ := json.Marshal(map[string]string{"sql": q})
				out, failed := call(t, s, "shop__query", string(args))
				if !failed || !strings.HasPrefix(out, "The query failed: ") {
					t.Errorf("%s: %v %s", q, failed, out)
				}
			}
			var n int
			var status string
			if err := db.QueryRow(`SELECT COUNT(*), MIN(status) FROM orders`).Scan(&n, &status); err != nil || n != 3 || status != "open" {
				t.Fatalf("after the attacks: %d rows, %q, %v", n, status, err)
			}
			if _, err := os.Stat("/tmp/other.db"); err == nil && kind == "sqlite" {
				t.Fatal("ATTACH made a file")
			}
			out, failed := call(t, s, "shop__query", `{"sql":"SELECT COUNT(*) AS n FROM orders"}`)
			if failed || out != `{"columns":["n"],"rows":[[3]],"row_count":1,"truncated":false}` {
				t.Fatalf("a read after the attacks: %s", out)
			}
		})
	}
}

// TestNamedTool: an operator's sql__ query takes its parameters as
// strings (or null) and answers like the query tool; bad arguments are
// the tools' sentences.
func TestNamedTool(t *testing.T) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			src, _ := source(t, kind)
			q := `SELECT id, note FROM orders WHERE status = ? ORDER BY id`
			if kind == "postgres" {
				q = `SELECT id, note FROM orders WHERE status = $1 ORDER BY id`
			}
			s := newService(t, datastore.Config{Datastores: []datastore.Source{src},
				SQLTools: []datastore.SQLTool{{Name: "orders", Datastore: "shop", Query: q, Params: []string{"status"}, MaxRows: 5}}})
			if got := strings.Join(s.Names(anyone), ","); got != "shop__query,sql__orders" {
				t.Fatalf("names: %s", got)
			}
			def, _ := s.Lookup(anyone, "sql__orders")
			if string(def.Schema) != `{"additionalProperties":false,"properties":{"status":{"type":["string","null"]}},"required":["status"],"type":"object"}` {
				t.Fatalf("schema: %s", def.Schema)
			}
			out, failed := call(t, s, "sql__orders", `{"status":"paid"}`)
			if failed || out != `{"columns":["id","note"],"rows":[[1,"first"],[3,"a, \"quoted\" note"]],"row_count":2,"truncated":false}` {
				t.Fatalf("answer: %s", out)
			}
			for args, want := range map[string]string{
				`{"status":"paid","x":1}`: `Invalid arguments: unknown field "x".`,
				`{"status":7}`:            `Invalid arguments: status must be a string.`,
				`[]`:                      `Invalid arguments: expected a JSON object.`,
			} {
				if out, failed := call(t, s, "sql__orders", args); !failed || out != want {
					t.Errorf("%s: %s, want %s", args, out, want)
				}
			}
			if out, _ := call(t, s, "shop__query", `{}`); out != `Invalid arguments: sql is required.` {
				t.Errorf("no sql: %s", out)
			}
		})
	}
}

// TestOrgs: a datastore naming organisations is offered to them only.
func TestOrgs(t *testing.T) {
	src, _ := source(t, "sqlite")
	src.Orgs = []string{"org_2"}
	s := newService(t, datastore.Config{Datastores: []datastore.Source{src}})
	if _, ok := s.Lookup(anyone, "shop__query"); ok {
		t.Fatal("offered to org_1")
	}
	if out, _ := call(t, s, "shop__query", `{"sql":"SELECT 1"}`); out != "Unknown tool: shop__query" {
		t.Fatalf("org_1 calls it: %s", out)
	}
	if _, ok := s.Lookup(governance.Principal{Org: store.Org{ID: "org_2"}}, "shop__query"); !ok {
		t.Fatal("not offered to org_2")
	}
}

// TestConfig: a bad configuration names the entry and key.
func TestConfig(t *testing.T) {
	ok := datastore.Source{Name: "shop", Path: "/x.db"}
	for want, cfg := range map[string]datastore.Config{
		`datastores[0].name: "Shop" is not a name`:                  {Datastores: []datastore.Source{{Name: "Shop", Path: "/x"}}},
		`datastores[0].name: "a__b" is not a name`:                  {Datastores: []datastore.Source{{Name: "a__b", Path: "/x"}}},
		`datastores[1].name: "shop" is used twice`:                  {Datastores: []datastore.Source{ok, ok}},
		`datastores[0]: give either path`:                           {Datastores: []datastore.Source{{Name: "shop"}}},
		`datastores[0].dsn: not a postgres:// URL`:                  {Datastores: []datastore.Source{{Name: "shop", DSN: "mysql://x"}}},
		`sql_tools[0].datastore: "nope" is no datastore`:            {Datastores: []datastore.Source{ok}, SQLTools: []datastore.SQLTool{{Name: "o", Datastore: "nope", Query: "SELECT 1"}}},
		`sql_tools[0].query: datastores are read-only`:              {Datastores: []datastore.Source{ok}, SQLTools: []datastore.SQLTool{{Name: "o", Datastore: "shop", Query: "DELETE FROM orders"}}},
		`sql_tools[0].params[0]: "Bad" is not a parameter name`:     {Datastores: []datastore.Source{ok}, SQLTools: []datastore.SQLTool{{Name: "o", Datastore: "shop", Query: "SELECT 1", Params: []string{"Bad"}}}},
		`datastores[0].max_rows: 20000 is not 0 (the default, 100)`: {Datastores: []datastore.Source{{Name: "shop", Path: "/x", MaxRows: 20000}}},
	} {
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: %v, want %s", cfg, err, want)
		}
	}
	for q, reads := range map[string]bool{"SELECT 1": true, "  -- c\nwith x as (select 1) select * from x": true,
		"/* c */ VALUES (1)": true, "(SELECT 1)": true, "DELETE FROM t": false, "/* open": false, "": false, "selectx": false} {
		if datastore.Reads(q) != reads {
			t.Errorf("Reads(%q) != %v", q, reads)
		}
	}
}

// TestRowBound: whatever the model writes, one value (SQLite) or row
// (PostgreSQL) past MaxRowBytes fails the query instead of filling the
// server's memory; the datastore answers again after it.
func TestRowBound(t *testing.T) {
	big := map[string]string{"sqlite": `SELECT zeroblob(20000000) AS b`, "postgres": `SELECT repeat('x', 20000000) AS b`}
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			src, _ := source(t, kind)
			s := newService(t, datastore.Config{Datastores: []datastore.Source{src}})
			args, _ := json.Marshal(map[string]string{"sql": big[kind]})
			out, failed := call(t, s, "shop__query", string(args))
			if !failed || !strings.HasPrefix(out, "The query failed: ") {
				t.Fatalf("a 20 MB value: %s", out)
			}
			t.Log(out)
			if out, failed := call(t, s, "shop__query", `{"sql":"SELECT length('abc') AS n"}`); failed || !strings.Contains(out, `[[3]]`) {
				t.Fatalf("after it: %s", out)
			}
		})
	}
}
