package httpapi_test

import (
	"context"
	"database/sql"
	"encoding/json"

	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/datastore"
	"github.com/cubicle-sandbox/cubicle/internal/responses"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/sandboxtest"
	"github.com/cubicle-sandbox/cubicle/internal/store/postgres/pgtest"
)

// The seed's sentences (computers-api.md, "Rows delivered to the computer").
const (
	internetRowsSentence = "Rows are not delivered to a computer that reaches the internet unless the organisation allows it with its computer_internet_bulk_rows setting."
)

// ordersDB makes the orders fixture in a real SQLite file or PostgreSQL
// schema and returns the datastore "shop" on it.
func ordersDB(t *testing.T, kind string) datastore.Source {
	t.Helper()
	stmts := []string{
		`CREATE TABLE orders (id INTEGER PRIMARY KEY, status TEXT NOT NULL, total DECIMAL(10,2), placed TIMESTAMP, day DATE, doc BLOB, note TEXT)`,
		`INSERT INTO orders VALUES (1, 'paid', 12.50, '2026-01-05 10:30:00', '2026-01-05', x'00ff10', 'first')`,
		`INSERT INTO orders VALUES (2, 'open', 7.25, '2026-02-01 08:00:00', '2026-02-01', NULL, NULL)`,
		`INSERT INTO orders VALUES (3, 'paid', 100, '2026-03-09 23:59:59', '2026-03-09', x'01', 'a, "quoted" note')`,
	}
	src := datastore.Source{Name: "shop"}
	driver := "sqlite"
	if kind == "sqlite" {
		src.Path = filepath.Join(t.TempDir(), "shop.db")
	} else {
		srv, err := pgtest.Start(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Stop)
		src.DSN, driver = srv.Schema(t), "pgx"
		for i, s := range stmts {
			s = strings.ReplaceAll(s, "BLOB", "bytea")
			s = strings.ReplaceAll(s, "x'00ff10'", `'\x00ff10'`)
			stmts[i] = strings.ReplaceAll(s, "x'01'", `'\x01'`)
		}
	}
	conn := src.Path
	if conn == "" {
		conn = src.DSN
	}
	db, err := sql.Open(driver, conn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	return src
}

// workspaceDriver is the scriptable driver whose computers share one
// in-memory workspace.
func workspaceDriver() (*sandboxtest.Workspace, *sandboxtest.Driver) {
	ws := sandboxtest.NewWorkspace(nil)
	return ws, &sandboxtest.Driver{New: func(context.Context, sandbox.Spec) (*sandboxtest.Sandbox, error) {
		return ws.Attach(&sandboxtest.Sandbox{}), nil
	}}
}

// withDatastores wires a gateway on up with the datastore service of cfg.
func (e *env) withDatastores(up *scripted, cfg datastore.Config) {
	e.t.Helper()
	ds, err := datastore.New(cfg, e.mgr, e.gov)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { ds.Close() })
	g, err := responses.New(responses.Config{UpstreamURL: up.srv.URL + "/v1", Model: "m"},
		responses.Deps{Computers: e.mgr, Store: e.st.Responses(), Datastores: ds})
	if err != nil {
		e.t.Fatal(err)
	}
	e.setGateway(g)
}

// recorded is a scripted upstream answering step with the tool messages
// of the request; seen returns the last request's.
func recorded(t *testing.T, step func(tm []string) any) (up *scripted, seen func() []string) {
	var last []string
	var mu sync.Mutex
	up = newScripted(t, func(n int, req map[string]any) (int, any) {
		tm := toolMessages(req)
		mu.Lock()
		last = tm
		mu.Unlock()
		return 200, step(tm)
	})
	return up, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return last
	}
}

// deliverThen: the model calls its datastore tool (args), then calls it
// again with command next to it, then answers.
func deliverThen(t *testing.T, tool, args, command string) (*scripted, func() []string) {
	return recorded(t, func(tm []string) any {
		switch len(tm) {
		case 0:
			return toolCallsAnswer(tool, args)
		case 1:
			cmd, _ := json.Marshal(map[string]any{"command": command, "timeout_seconds": nil})
			return toolCallsAnswer(tool, args, "builtin__computer_exec", string(cmd))
		}
		return chatAnswer(map[string]any{"role": "assistant", "content": "done"})
	})
}

// deliverThenCat prints the delivered file.
func deliverThenCat(t *testing.T, tool, args string) (*scripted, func() []string) {
	return deliverThen(t, tool, args, "cat /workspace/results/call_1.csv")
}

// TestResponsesDeliverRows: "deliver": "computer" writes every row into
// the response's computer at /workspace/results/<call id>.csv with a
// header row, values as the tool's ordinary answer writes them ("a
// decimal number as text, a time as ISO 8601, bytes as [binary]", "an
// empty cell for null"); the model reads only columns, row_count,
// truncated and path; "An SQL tool's own max_rows does not apply". Real
// SQLite and PostgreSQL datastores, a real computer.
func TestResponsesDeliverRows(t *testing.T) {
	totals := map[string][3]string{"sqlite": {"12.5", "7.25", "100"}, "postgres": {"12.50", "7.25", "100.00"}}
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, nil)
			src := ordersDB(t, kind)
			up, seenBy := deliverThenCat(t, "sql__orders", `{}`)
			e.withDatastores(up, datastore.Config{Datastores: []datastore.Source{src}, SQLTools: []datastore.SQLTool{{
				Name: "orders", Datastore: "shop", MaxRows: 1,
				Query: "SELECT id, status, total, placed, day, doc, note FROM orders ORDER BY id"}}})
			_, key := e.newKey("", computerCaps)
			r := e.do(key, "POST", "/v1/responses", map[string]any{"input": "orders",
				"tools": []any{map[string]any{"type": "tool", "name": "sql__orders", "deliver": "computer"},
					map[string]any{"type": "tool", "name": "builtin__computer_exec"}}})
			if r.code != 200 {
				t.Fatalf("create: %s", r)
			}
			const delivered = `{"columns":["id","status","total","placed","day","doc","note"],"row_count":3,"truncated":false,"path":"/workspace/results/call_1.csv"}`
			tot := totals[kind]
			csv := "id,status,total,placed,day,doc,note\n" +
				"1,paid," + tot[0] + ",2026-01-05T10:30:00Z,2026-01-05,[binary],first\n" +
				"2,open," + tot[1] + ",2026-02-01T08:00:00Z,2026-02-01,,\n" +
				"3,paid," + tot[2] + `,2026-03-09T23:59:59Z,2026-03-09,[binary],"a, ""quoted"" note"` + "\n"
			seen := seenBy()
			if len(seen) != 3 || seen[0] != delivered || seen[1] != delivered ||
				seen[2] != "exit_code: 0\nstdout:\n"+csv+"\nstderr:\n" {
				t.Fatalf("the model saw:\n%s", strings.Join(seen, "\n---\n"))
			}
			var out responseObj
			r.json(t, &out)
			if len(out.Output) != 4 || out.Output[0].Name != "sql__orders" || out.Output[0].Output != delivered ||
				out.Output[0].Status != "completed" || !strings.HasPrefix(out.Output[0].ContainerID, "cmp_") ||
				out.Output[2].ContainerID != out.Output[0].ContainerID {
				t.Fatalf("items: %s", r)
			}
			if up.count() != 3 {
				t.Fatalf("%d upstream calls", up.count())
			}
		})
	}
}

// TestResponsesDeliverLimits: the deployment's limits bound a delivery
// ("truncated: true says that rows were left out"); without deliver the
// tool answers the model its rows (max_rows) and no computer is made.
func TestResponsesDeliverLimits(t *testing.T) {
	e := newEnv(t, nil)
	src := ordersDB(t, "sqlite")
	src.MaxRows = 2
	header := len("id,status\n")
	for _, c := range []struct {
		cfg  datastore.Config
		want string
	}{
		{datastore.Config{DeliverMaxRows: 2}, `{"columns":["id","status"],"row_count":2,"truncated":true,"path":"/workspace/results/call_1.csv"}` + "|1,paid\n2,open\n"},
		{datastore.Config{DeliverMaxBytes: int64(header + len("1,paid\n") + 3)}, `{"columns":["id","status"],"row_count":1,"truncated":true,"path":"/workspace/results/call_1.csv"}` + "|1,paid\n"},
		{datastore.Config{}, `{"columns":["id","status"],"row_count":3,"truncated":false,"path":"/workspace/results/call_1.csv"}` + "|1,paid\n2,open\n3,paid\n"},
	} {
		up, seenBy := deliverThenCat(t, "shop__query", `{"sql":"SELECT id, status FROM orders ORDER BY id"}`)
		c.cfg.Datastores = []datastore.Source{src}
		e.withDatastores(up, c.cfg)
		_, key := e.newKey("", computerCaps)
		r := e.do(key, "POST", "/v1/responses", map[string]any{"input": "orders",
			"tools": []any{map[string]any{"type": "tool", "name": "shop__query", "deliver": "computer"},
				map[string]any{"type": "tool", "name": "builtin__computer_exec"}}})
		seen := seenBy()
		if r.code != 200 || len(seen) != 3 {
			t.Fatalf("create: %s", r)
		}
		got := seen[0] + "|" + strings.TrimPrefix(strings.TrimSuffix(seen[2], "\nstderr:\n"), "exit_code: 0\nstdout:\nid,status\n")
		if got != c.want {
			t.Fatalf("limits %+v: got %s, want %s", c.cfg, got, c.want)
		}
	}

	// Not delivered: the model reads the rows; no computer.
	up := newScripted(t, func(n int, req map[string]any) (int, any) {
		if len(toolMessages(req)) == 0 {
			return 200, toolCallsAnswer("shop__query", `{"sql":"SELECT id, status FROM orders ORDER BY id"}`)
		}
		return 200, chatAnswer(map[string]any{"role": "assistant", "content": lastToolMessage(req)})
	})
	e.withDatastores(up, datastore.Config{Datastores: []datastore.Source{src}})
	_, key := e.newKey("", `{"tooling":{}}`)
	r := e.do(key, "POST", "/v1/responses", map[string]any{"input": "orders",
		"tools": []any{map[string]any{"type": "tool", "name": "shop__query"}}})
	var out responseObj
	r.json(t, &out)
	const rows = `{"columns":["id","status"],"rows":[[1,"paid"],[2,"open"]],"row_count":2,"truncated":true}`
	if r.code != 200 || len(out.Output) != 2 || out.Output[0].Output != rows || out.Output[0].ContainerID != "" ||
		out.Output[1].Content[0].Text != rows {
		t.Fatalf("answered rows: %s", r)
	}
	_, lister := e.newKey("", computerCaps) // same organisation
	if cs := e.computersOf(lister, out.ID); len(cs) != 0 {
		t.Fatalf("a computer for rows answered to the model: %+v", cs)
	}
}

// TestResponsesDeliverRefused: "deliver is accepted only on an sql__ tool
// whose query reads and on a datastore's __query tool, and only in a turn
// in which your key would be offered builtin__computer_exec; otherwise the
// request is rejected with 422 on tools.<n>.deliver" (the gateway writes
// that param tools[n].deliver, as its others), before any upstream call.
func TestResponsesDeliverRefused(t *testing.T) {
	e := newEnvOn(t, t.TempDir(), &sandboxtest.Driver{}, nil)
	src := ordersDB(t, "sqlite")
	up := newScripted(t, func(int, map[string]any) (int, any) {
		return 200, chatAnswer(map[string]any{"role": "assistant", "content": "hi"})
	})
	e.withDatastores(up, datastore.Config{Datastores: []datastore.Source{src}})
	_, key := e.newKey("", computerCaps)
	_, noComputer := e.newKey("", `{"tooling":{}}`)
	dq := map[string]any{"type": "tool", "name": "shop__query", "deliver": "computer"}
	for _, c := range []struct {
		key   string
		tools []any
		code  int
		param string
	}{
		{key, []any{map[string]any{"type": "tool", "name": "builtin__computer_exec", "deliver": "computer"}}, 422, "tools[0].deliver"},
		{key, []any{dq, map[string]any{"type": "code_interpreter", "container": map[string]any{"type": "auto"}, "deliver": "computer"}}, 422, "tools[1].deliver"},
		{key, []any{map[string]any{"type": "function", "name": "f", "deliver": "computer"}}, 422, "tools[0].deliver"},
		{key, []any{map[string]any{"type": "tool", "name": "sql__nope", "deliver": "computer"}}, 422, "tools[0].deliver"},
		{noComputer, []any{dq}, 422, "tools[0].deliver"},
		{key, []any{map[string]any{"type": "tool", "name": "shop__query", "deliver": "model"}}, 400, "tools[0].deliver"},
		{key, []any{dq, dq}, 400, "tools[1].name"},
	} {
		r := e.do(c.key, "POST", "/v1/responses", map[string]any{"input": "x", "tools": c.tools})
		code := "deliver_not_allowed"
		if c.code == 400 {
			code = "invalid_request"
		}
		if er := r.wantError(t, c.code, code); er.Error.Param == nil || *er.Error.Param != c.param {
			t.Fatalf("%v: %s", c.tools, r)
		}
	}
	if up.count() != 0 {
		t.Fatalf("%d upstream calls", up.count())
	}
	// Without deliver, a key without computers may use the tool.
	if r := e.do(noComputer, "POST", "/v1/responses", map[string]any{"input": "x",
		"tools": []any{map[string]any{"type": "tool", "name": "shop__query"}}}); r.code != 200 {
		t.Fatalf("no deliver: %s", r)
	}
}

// TestResponsesDeliverInternet: "On a computer that reaches the internet,
// rows are delivered only if your organisation has turned on
// computer_internet_bulk_rows. Otherwise the call reads no rows at all and
// the model is told" the seed's sentence; "The refusal is in the audit
// trail." With the switch on (PATCH /v1/admin/orgs) the rows are
// delivered. The computer is the scriptable driver's (its workspace in
// memory): an internet computer needs no network to be refused.
func TestResponsesDeliverInternet(t *testing.T) {
	ws, drv := workspaceDriver()
	e := newEnvOn(t, t.TempDir(), drv, func(c *computer.Config) {
		c.Internet = computer.Internet{Enabled: true, Domains: []string{"*"}}
	})
	src := ordersDB(t, "sqlite")
	up := newScripted(t, func(n int, req map[string]any) (int, any) {
		if len(toolMessages(req)) == 0 {
			return 200, toolCallsAnswer("shop__query", `{"sql":"SELECT id FROM orders ORDER BY id"}`)
		}
		return 200, chatAnswer(map[string]any{"role": "assistant", "content": lastToolMessage(req)})
	})
	e.withDatastores(up, datastore.Config{Datastores: []datastore.Source{src}})
	org, key := e.newPolicyOrg("", true)
	body := map[string]any{"input": "ids", "tools": []any{
		map[string]any{"type": "code_interpreter", "container": map[string]any{"type": "auto",
			"network_policy": map[string]any{"type": "allowlist", "allowed_domains": []string{"pypi.org"}}}},
		map[string]any{"type": "tool", "name": "shop__query", "deliver": "computer"}}}

	r := e.do(key, "POST", "/v1/responses", body)
	var out responseObj
	r.json(t, &out)
	if r.code != 200 || len(out.Output) != 2 || out.Output[0].Output != internetRowsSentence || out.Output[0].Status != "failed" ||
		out.Output[1].Content[0].Text != internetRowsSentence {
		t.Fatalf("refused: %s", r)
	}
	if w := ws.Writes(); len(w) != 0 {
		t.Fatalf("a refused delivery wrote %v", w)
	}
	evs := e.audit(key, "?type=datastore.delivery_refused")
	if len(evs) != 1 || evs[0].ComputerID != out.Output[0].ContainerID || evs[0].Data["tool"] != "shop__query" {
		t.Fatalf("audit: %+v", evs)
	}

	e.patchOrg(org, `{"computer_internet_bulk_rows": true}`)
	r = e.do(key, "POST", "/v1/responses", body)
	r.json(t, &out)
	const delivered = `{"columns":["id"],"row_count":3,"truncated":false,"path":"/workspace/results/call_1.csv"}`
	if r.code != 200 || out.Output[0].Output != delivered {
		t.Fatalf("allowed: %s", r)
	}
	if w := ws.Writes(); len(w) != 1 || w[0] != "/workspace/results/call_1.csv" {
		t.Fatalf("writes %v", w)
	}
	var admin struct {
		Data []struct {
			ID       string `json:"id"`
			BulkRows bool   `json:"computer_internet_bulk_rows"`
		} `json:"data"`
	}
	e.do(e.admin, "GET", "/v1/admin/orgs", nil).json(t, &admin)
	for _, o := range admin.Data {
		if o.ID == org && !o.BulkRows {
			t.Fatalf("the switch is not shown: %+v", admin)
		}
	}
}

// TestResponsesDeliverBusy: "Core runs a few deliveries at a time per
// server; when it is at that number, the call reads nothing and the model
// is told to call the tool again shortly." One slot, held by a slow
// PostgreSQL query.
func TestResponsesDeliverBusy(t *testing.T) {
	ws, drv := workspaceDriver()
	e := newEnvOn(t, t.TempDir(), drv, nil)
	src := ordersDB(t, "postgres")
	up := newScripted(t, func(n int, req map[string]any) (int, any) {
		if len(toolMessages(req)) > 0 {
			return 200, chatAnswer(map[string]any{"role": "assistant", "content": lastToolMessage(req)})
		}
		q := `{"sql":"SELECT 1 AS n"}`
		if b, _ := json.Marshal(req["messages"]); strings.Contains(string(b), "slow") {
			q = `{"sql":"SELECT 1 AS n FROM pg_sleep(3)"}`
		}
		return 200, toolCallsAnswer("shop__query", q)
	})
	e.withDatastores(up, datastore.Config{Datastores: []datastore.Source{src}, DeliverConcurrency: 1})
	_, key := e.newKey("", computerCaps)
	ask := func(input string) string {
		r := e.do(key, "POST", "/v1/responses", map[string]any{"input": input,
			"tools": []any{map[string]any{"type": "tool", "name": "shop__query", "deliver": "computer"}}})
		var out responseObj
		r.json(t, &out)
		if r.code != 200 || len(out.Output) != 2 {
			t.Errorf("%s: %s", input, r)
			return ""
		}
		return out.Output[0].Output
	}
	slow := make(chan string)
	go func() { slow <- ask("slow") }()
	time.Sleep(time.Second)
	if got := ask("fast"); got != datastore.BusySentence {
		t.Fatalf("while the slot is taken: %s", got)
	}
	if got := <-slow; got != `{"columns":["n"],"row_count":1,"truncated":false,"path":"/workspace/results/call_1.csv"}` {
		t.Fatalf("the slow delivery: %s", got)
	}
	if w := ws.Writes(); len(w) != 1 {
		t.Fatalf("the busy call wrote: %v", w)
	}
	if got := ask("fast"); !strings.Contains(got, `"row_count":1`) {
		t.Fatalf("after the slot is free: %s", got)
	}
}

// TestResponsesDeliverIntoAFile: a workspace the model made unfit (results
// is a file) is a sentence for the model, not a failed response; the turn
// goes on.
func TestResponsesDeliverIntoAFile(t *testing.T) {
	e := newEnv(t, nil)
	src := ordersDB(t, "sqlite")
	up, seenBy := recorded(t, func(tm []string) any {
		if len(tm) == 0 {
			return toolCallsAnswer("builtin__computer_exec", `{"command":"echo x > /workspace/results","timeout_seconds":null}`,
				"shop__query", `{"sql":"SELECT id FROM orders"}`)
		}
		return chatAnswer(map[string]any{"role": "assistant", "content": "ok"})
	})
	e.withDatastores(up, datastore.Config{Datastores: []datastore.Source{src}})
	_, key := e.newKey("", computerCaps)
	r := e.do(key, "POST", "/v1/responses", map[string]any{"input": "x",
		"tools": []any{map[string]any{"type": "tool", "name": "shop__query", "deliver": "computer"},
			map[string]any{"type": "tool", "name": "builtin__computer_exec"}}})
	if seen := seenBy(); r.code != 200 || len(seen) != 2 || seen[1] != "Not a directory: /workspace/results/call_2.csv" {
		t.Fatalf("%s\nthe model saw %q", r, seen)
	}
}

// TestResponsesDeliverLarge: a delivery of megabytes reaches a real
// computer whole, and stops within deliver_max_bytes with truncated. (The
// datastore's timeout bounds the query with its delivery: SQLite under
// -race on a loaded host needs more than the default 30 s.)
func TestResponsesDeliverLarge(t *testing.T) {
	e := newEnv(t, nil)
	src := ordersDB(t, "sqlite")
	src.Timeout = 3 * time.Minute
	const q = `{"sql":"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000) SELECT i, printf('%040d', i) AS pad FROM n"}`
	for _, c := range []struct {
		limit int64
		want  string
	}{
		{0, `{"columns":["i","pad"],"row_count":100000,"truncated":false,"path":"/workspace/results/call_1.csv"}`},
		{2 << 20, `"truncated":true`},
	} {
		up, seenBy := deliverThen(t, "shop__query", q, "wc -c -l < /workspace/results/call_1.csv; tail -1 /workspace/results/call_1.csv")
		e.withDatastores(up, datastore.Config{Datastores: []datastore.Source{src}, DeliverMaxBytes: c.limit})
		_, key := e.newKey("", computerCaps)
		r := e.do(key, "POST", "/v1/responses", map[string]any{"input": "x",
			"tools": []any{map[string]any{"type": "tool", "name": "shop__query", "deliver": "computer"},
				map[string]any{"type": "tool", "name": "builtin__computer_exec"}}})
		seen := seenBy()
		if r.code != 200 || len(seen) != 3 || !strings.Contains(seen[0], c.want) {
			t.Fatalf("limit %d: %s\nthe model saw %q", c.limit, r, seen)
		}
		var lines, size int64
		var last string
		fields := strings.Fields(strings.TrimPrefix(seen[2], "exit_code: 0\nstdout:\n"))
		if len(fields) < 3 {
			t.Fatalf("exec: %q", seen[2])
		}
		json.Unmarshal([]byte(fields[0]), &lines)
		json.Unmarshal([]byte(fields[1]), &size)
		last = fields[2]
		var d datastore.Delivered
		json.Unmarshal([]byte(seen[0]), &d)
		if lines != d.RowCount+1 || (c.limit > 0 && (size > c.limit || size < c.limit-100)) ||
			(c.limit == 0 && last != "100000,0000000000000000000000000000000000100000") {
			t.Fatalf("limit %d: %d lines, %d bytes, last %q; delivered %+v", c.limit, lines, size, last, d)
		}
	}
}
