package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cubicle-sandbox/cubicle/internal/store/postgres/pgtest"
)

// TestServePostgres (issue 18): 'cubicle serve --store postgres://…' keeps
// its state in PostgreSQL: a computer is created, runs a command and is
// deleted through the API, its usage row and events are in the database
// (and no SQLite file in the data directory). Several servers on one
// database: TestServeFleet.
func TestServePostgres(t *testing.T) {
	ctx := context.Background()
	dbURL := postgresDB(t)
	dir := t.TempDir()
	gcAfter(t, dir)
	s := startServer(t, dir, serveEnv("CUBICLE_ADMIN_KEY="+serveAdminKey), "--store", dbURL)

	var c struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	s.decode("POST", "/v1/computers", "", 201, &c)
	if !strings.HasPrefix(c.ID, "cmp_") || c.Status != "ready" {
		t.Fatalf("created %+v", c)
	}
	var ex struct {
		ExitCode int    `json:"exit_code"`
		Stdout   string `json:"stdout"`
	}
	s.decode("POST", "/v1/computers/"+c.ID+"/exec", `{"command":"echo on postgres"}`, 200, &ex)
	if ex.ExitCode != 0 || ex.Stdout != "on postgres\n" {
		t.Fatalf("exec: %+v", ex)
	}
	s.decode("DELETE", "/v1/computers/"+c.ID, "", 204, nil)
	s.decode("GET", "/v1/computers/"+c.ID, "", 200, &c)
	if c.Status != "destroyed" {
		t.Fatalf("after the delete: %s", c.Status)
	}
	var usage struct{ Data []usageRow }
	s.decode("GET", "/v1/usage", "", 200, &usage)
	var audit struct{ Data []auditEvent }
	s.decode("GET", "/v1/audit", "", 200, &audit)
	events := map[string]int{}
	for _, e := range audit.Data {
		if e.ComputerID == c.ID {
			events[e.Type]++
		}
	}
	if len(usage.Data) != 1 || usage.Data[0].ComputerID != c.ID || usage.Data[0].Kind != "sandbox_seconds" ||
		events["computer.created"] != 1 || events["computer.destroyed"] != 1 {
		t.Fatalf("usage %+v, events %v: want one row, one created and one destroyed event", usage.Data, events)
	}

	// The rows are PostgreSQL's; SQLite was not used.
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var status string
	var n int
	if err := conn.QueryRow(ctx, `SELECT status, (SELECT COUNT(*) FROM usage WHERE computer_id = $1) FROM computers WHERE id = $1`, c.ID).Scan(&status, &n); err != nil || status != "destroyed" || n != 1 {
		t.Fatalf("in postgres: %q, %d usage rows, %v", status, n, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "cubicle.db")); !os.IsNotExist(err) {
		t.Fatalf("a SQLite database in the data directory: %v", err)
	}
	s.stop()
}

// postgresDB starts a PostgreSQL server for the test (pgtest) and
// returns the URL of an empty database on it.
func postgresDB(t *testing.T) string {
	pg, err := pgtest.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pg.Stop)
	return pg.Database(t)
}
