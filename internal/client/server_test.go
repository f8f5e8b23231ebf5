package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/client"
	"github.com/cubicle-sandbox/cubicle/internal/httpapi/httpapitest"
	"github.com/cubicle-sandbox/cubicle/internal/testbin"
)

var agentBin string

func TestMain(m *testing.M) { os.Exit(testbin.Main(m, &agentBin)) }

const adminKey = "cub_client_test_admin_0001"

// realServer is the real REST API (SQLite, the linux driver, real
// computers) on an httptest server, and a client of it with the admin key.
func realServer(t *testing.T) (*client.Client, string) {
	t.Helper()
	srv := httpapitest.Start(t, agentBin, adminKey, httpapitest.Config())
	c, err := client.New(client.Config{URL: srv.URL, Key: adminKey})
	if err != nil {
		t.Fatal(err)
	}
	return c, srv.URL
}

// TestRealServer drives the computers and exec methods against the real API.
func TestRealServer(t *testing.T) {
	c, url := realServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	v, err := c.Create(ctx, client.CreateRequest{Metadata: map[string]string{"k": "v"}})
	if err != nil || !strings.HasPrefix(v.ID, "cmp_") || v.Status != "ready" || v.Limits.MemoryMB != 256 || v.Metadata["k"] != "v" {
		t.Fatalf("create: %+v, %v", v, err)
	}
	if g, err := c.Get(ctx, v.ID); err != nil || g.ID != v.ID || g.ReadyAt == nil {
		t.Fatalf("get: %+v, %v", g, err)
	}
	if l, err := c.List(ctx, false); err != nil || len(l) != 1 || l[0].ID != v.ID {
		t.Fatalf("list: %+v, %v", l, err)
	}

	res, err := c.Exec(ctx, v.ID, client.ExecRequest{Command: "echo out; echo err >&2; exit 3"})
	if err != nil || res.ExitCode != 3 || res.Stdout != "out\n" || res.Stderr != "err\n" {
		t.Fatalf("exec: %+v, %v", res, err)
	}
	var streamed []string
	res, err = c.ExecStream(ctx, v.ID, client.ExecRequest{Argv: []string{"/bin/sh", "-c", "echo a; sleep .2; echo b >&2"}},
		func(o client.ExecOutput) { streamed = append(streamed, o.Stream+":"+o.Data) })
	if err != nil || res.ExitCode != 0 || strings.Join(streamed, "|") != "stdout:a\n|stderr:b\n" {
		t.Fatalf("exec stream: %+v, %q, %v", res, streamed, err)
	}

	if m, err := c.Metrics(ctx); err != nil || !strings.Contains(string(m), "cubicle_pool_depth") {
		t.Fatalf("metrics: %v", err)
	}

	if err := c.Delete(ctx, v.ID); err != nil {
		t.Fatalf("delete: %v", err)
	}
	_, err = c.ExecStream(ctx, v.ID, client.ExecRequest{Command: "true"}, nil)
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != http.StatusConflict || ce.Code != "computer_gone" || ce.Type != "invalid_request_error" {
		t.Fatalf("exec after delete: %#v", err)
	}
	_, err = c.Get(ctx, "cmp_nosuch")
	if !errors.As(err, &ce) || ce.Status != http.StatusNotFound || ce.Code != "not_found" || ce.RequestID == "" {
		t.Fatalf("get unknown: %#v", err)
	}
	bad, _ := client.New(client.Config{URL: url, Key: "cub_wrong"})
	if _, err := bad.List(ctx, true); !errors.As(err, &ce) || ce.Status != http.StatusUnauthorized || ce.Type != "authentication_error" {
		t.Fatalf("wrong key: %#v", err)
	}
}

// needKernel fails a test of python calls at once, with the fix, on a host
// without ipykernel (scripts/setup.sh installs it; make test runs it).
func needKernel(t *testing.T) {
	if exec.Command("/usr/bin/python3", "-c", "import ipykernel").Run() != nil {
		t.Fatal("python3-ipykernel is not installed: run make setup (scripts/setup.sh)")
	}
}

// TestRealPython: python calls, unary and streamed, and interrupt; the
// client's types hold every field the server sends: an answer decoded and
// encoded again is the same JSON.
func TestRealPython(t *testing.T) {
	needKernel(t)
	c, _ := realServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	v, err := c.Create(ctx, client.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	cells := []client.Cell{{Code: "print('hi')\n6*7", Title: "t"}, {Code: "1/0"}, {Code: "never"}}
	py, err := c.Python(ctx, v.ID, client.PythonRequest{Cells: cells})
	if err != nil || py.Status != "error" || py.FailedCell == nil || *py.FailedCell != 1 || py.Cells[0].Title != "t" ||
		len(py.Cells[0].Outputs) != 2 || py.Cells[0].Outputs[1].Text != "42" || py.Cells[1].Outputs[0].EName != "ZeroDivisionError" {
		t.Fatalf("python: %+v, %v", py, err)
	}
	var outs []client.PythonOutput
	pys, err := c.PythonStream(ctx, v.ID, client.PythonRequest{Cells: cells}, func(o client.PythonOutput) { outs = append(outs, o) })
	texts := func(r client.PythonResult) (s []string) {
		for _, o := range r.Cells[0].Outputs {
			s = append(s, o.Type+":"+o.Text)
		}
		return s
	}
	if err != nil || len(outs) != 3 || !reflect.DeepEqual(texts(pys), texts(py)) || pys.Cells[2].Status != "skipped" {
		t.Fatalf("python stream: %+v, %+v, %v", pys, outs, err)
	}
	if err := c.InterruptPython(ctx, v.ID); err != nil {
		t.Fatalf("interrupt: %v", err)
	}
	if err := c.InterruptPython(ctx, v.ID); err != nil {
		t.Fatalf("interrupt: %v", err)
	}
	body := client.PythonRequest{Cells: []client.Cell{{Code: "from IPython.display import display, JSON\n" +
		"display(JSON({'a': 1}))\nimport sys; print('e', file=sys.stderr)\ninput()", Title: "all"}}}
	var raw json.RawMessage
	if _, err := c.Do(ctx, "POST", "/v1/computers/"+v.ID+"/python", body, 200, &raw); err != nil {
		t.Fatal(err)
	}
	var typed client.PythonResult
	if err := json.Unmarshal(raw, &typed); err != nil {
		t.Fatal(err)
	}
	again, _ := json.Marshal(typed)
	var a, b any
	json.Unmarshal(raw, &a)
	json.Unmarshal(again, &b)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("the server sent\n%s\nthe client kept\n%s", raw, again)
	}
	var rawV json.RawMessage
	if _, err := c.Do(ctx, "GET", "/v1/computers/"+v.ID, nil, 200, &rawV); err != nil {
		t.Fatal(err)
	}
	var typedV client.Computer
	json.Unmarshal(rawV, &typedV)
	againV, _ := json.Marshal(typedV)
	json.Unmarshal(rawV, &a)
	json.Unmarshal(againV, &b)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("the server sent\n%s\nthe client kept\n%s", rawV, againV)
	}
}
