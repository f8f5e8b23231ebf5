package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/testbin"

	"github.com/cubicle-sandbox/cubicle/internal/blob"
	"github.com/cubicle-sandbox/cubicle/internal/client"
	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/files"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/httpapi"
	"github.com/cubicle-sandbox/cubicle/internal/responses"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/linux"
	"github.com/cubicle-sandbox/cubicle/internal/store/sqlite"
)

// agentBin is the real cubicle binary, built without cgo as in production;
// computers in these tests run it as their agent.
var agentBin string

func TestMain(m *testing.M) {
	os.Exit(testbin.Main(m, &agentBin))
}

const adminSecret = "cub_test_admin_secret_0001"

// env is one in-process server: real SQLite, real linux driver, real
// computers, real HTTP.
type env struct {
	t     *testing.T
	url   string
	api   *httpapi.API
	mgr   *computer.Manager
	gov   *governance.Service
	st    *sqlite.DB
	dir   string             // data directory (SQLite file, driver state)
	admin string             // admin secret
	files *files.Service     // wired by the withFiles option; nil: none
	gw    *responses.Gateway // the last gateway wired (withGatewayConfig, …)
	// opts built api; rewire builds it again with changes, and the
	// server serves the newest.
	opts     httpapi.Options
	handler  *atomic.Pointer[httpapi.API] // shared by copies (pySub)
	notReady bool                         // the API is built unready
}

// envOption changes what newEnv wires before the manager is built
// (everything is given at construction, as serve does).
type envOption func(*envSetup)

type envSetup struct {
	notReady bool
	files    bool
	// artifacts wraps the files service the manager exports to.
	artifacts func(*files.Service) computer.Artifacts
}

// notReady leaves the server unready (the isolation probe has not passed).
func notReady(s *envSetup) { s.notReady = true }

// withFiles wires the files service as serve does (blobs in <dir>/blobs).
func withFiles(s *envSetup) { s.files = true }

// testConfig is a small deployment: cheap computers, no warm pool.
func testConfig() computer.Config {
	return computer.Config{
		Memory: 256 << 20, Pids: 128, CPUs: 1, Disk: 32 << 20,
		Lifetime: 600 * time.Second, ExecTimeout: 30 * time.Second, MaxConcurrent: 8,
		MemoryBudget: 8 << 30, PoolSize: 0, MaxFileBytes: 1 << 20, MaxOutputBytes: 1 << 20,
	}
}

// newEnv starts a server; tweak adjusts the deployment's limits. The
// server is ready (SetReady) unless the notReady option is given.
func newEnv(t *testing.T, tweak func(*computer.Config), opts ...envOption) *env {
	t.Helper()
	return newEnvIn(t, t.TempDir(), tweak, opts...)
}

// newEnvIn is newEnv with its data directory at dir.
func newEnvIn(t *testing.T, dir string, tweak func(*computer.Config), opts ...envOption) *env {
	t.Helper()
	drv, err := linux.New(linux.Config{StateDir: dir, AgentPath: agentBin})
	if err != nil {
		t.Fatal(err)
	}
	return newEnvOn(t, dir, drv, tweak, opts...)
}

// newEnvOn is newEnvIn on the driver drv (a fake, for tests of shapes).
func newEnvOn(t *testing.T, dir string, drv sandbox.Driver, tweak func(*computer.Config), opts ...envOption) *env {
	t.Helper()
	var setup envSetup
	for _, o := range opts {
		o(&setup)
	}
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "cubicle.db"))
	if err != nil {
		t.Fatal(err)
	}
	gov := governance.New(st)
	if _, err := gov.Bootstrap(ctx, adminSecret); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, gov: gov, st: st, dir: dir, admin: adminSecret, notReady: setup.notReady,
		handler: new(atomic.Pointer[httpapi.API])}
	cfg := testConfig()
	if tweak != nil {
		tweak(&cfg)
	}
	if setup.files || setup.artifacts != nil {
		b, err := blob.NewDir(filepath.Join(dir, "blobs"))
		if err != nil {
			t.Fatal(err)
		}
		e.files = files.New(st, b, files.Limits{MaxBytes: filesTestMax})
		cfg.Artifacts = e.files
		if setup.artifacts != nil {
			cfg.Artifacts = setup.artifacts(e.files)
		}
	}
	e.mgr = computer.New(cfg, drv, st, gov)
	if err := e.mgr.Start(ctx); err != nil {
		t.Fatal(err)
	}
	e.opts = httpapi.Options{Governance: gov, Computers: e.mgr, Store: st, Files: e.files}
	e.rewire(func(*httpapi.Options) {})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.handler.Load().ServeHTTP(w, r)
	}))
	e.url = srv.URL
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		e.mgr.Close(context.Background())
		st.Close()
	})
	return e
}

// rewire builds the API again with change applied to its options (a
// gateway, a body timeout) and serves it from the next request on: the
// test's stand-in for a restart with another configuration.
func (e *env) rewire(change func(*httpapi.Options)) {
	change(&e.opts)
	api := httpapi.New(e.opts)
	api.SetReady(!e.notReady)
	e.api = api
	e.handler.Store(api)
}

// resp is a finished HTTP exchange.
type resp struct {
	code int
	body []byte
	hdr  http.Header
}

func (r resp) String() string { return fmt.Sprintf("%d %s", r.code, bytes.TrimSpace(r.body)) }

// json decodes the body into v, failing the test on malformed JSON.
func (r resp) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r, err)
	}
}

// apiErr is the error body of the API.
type apiErr struct {
	Error struct {
		Code    string  `json:"code"`
		Message string  `json:"message"`
		Param   *string `json:"param"`
	} `json:"error"`
}

// openAIErrorTypes are OpenAI's error types by status (the rest:
// invalid_request_error).
var openAIErrorTypes = map[int]string{401: "authentication_error", 403: "permission_error", 429: "rate_limit_error",
	500: "server_error", 502: "server_error", 503: "service_unavailable_error", 507: "server_error"}

// wantError checks the status and the OpenAI-style error shape: type (as
// OpenAI's for the status), code and message present, and the key "param"
// present (null or a string).
func (r resp) wantError(t *testing.T, code int, errCode string) apiErr {
	t.Helper()
	if r.code != code {
		t.Fatalf("status %s, want %d", r, code)
	}
	var raw map[string]map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &raw); err != nil {
		t.Fatalf("error body is not JSON: %s", r)
	}
	for _, k := range []string{"type", "code", "message", "param"} {
		if _, ok := raw["error"][k]; !ok {
			t.Fatalf("error body lacks error.%s: %s", k, r)
		}
	}
	wantType, ok := openAIErrorTypes[code]
	if !ok {
		wantType = "invalid_request_error"
	}
	if got := string(raw["error"]["type"]); got != `"`+wantType+`"` {
		t.Fatalf("error.type %s, want %q: %s", got, wantType, r)
	}
	var e apiErr
	r.json(t, &e)
	if e.Error.Message == "" {
		t.Fatalf("empty error message: %s", r)
	}
	if errCode != "" && e.Error.Code != errCode {
		t.Fatalf("error code %q, want %q: %s", e.Error.Code, errCode, r)
	}
	return e
}

// do sends a request with key (empty: no Authorization) and a body
// (nil, []byte, string, io.Reader or a value to encode as JSON).
func (e *env) do(key, method, path string, body any) resp {
	e.t.Helper()
	return e.doCtx(context.Background(), key, method, path, body, nil)
}

func (e *env) doCtx(ctx context.Context, key, method, path string, body any, hdr map[string]string) resp {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = strings.NewReader(b)
	case io.Reader:
		rd = b
	default:
		j, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatalf("%s %s: read body (status %d): %v", method, path, res.StatusCode, err)
	}
	return resp{code: res.StatusCode, body: b, hdr: res.Header}
}

// rawDo is like do but reports transport and body errors instead of
// failing, for endpoints whose misbehaviour is a broken response.
func (e *env) rawDo(key, method, path string, body io.Reader) (resp, error) {
	req, err := http.NewRequest(method, e.url+path, body)
	if err != nil {
		return resp{}, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return resp{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return resp{code: res.StatusCode, body: b, hdr: res.Header}, err
}

// apiClient is a client of the server (internal/client) with key ("": none).
func (e *env) apiClient(key string) *client.Client {
	e.t.Helper()
	c, err := client.New(client.Config{URL: e.url, Key: key})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// callCtx bounds a helper's call like do's.
func callCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 90*time.Second)
}

// view is the computer object, as the API's client decodes it.
type view = client.Computer

// create makes a computer (body: nil, or a value sent as JSON) and fails
// unless the answer is 201.
func (e *env) create(key string, body any) view {
	e.t.Helper()
	ctx, cancel := callCtx()
	defer cancel()
	var v view
	if _, err := e.apiClient(key).Do(ctx, "POST", "/v1/computers", body, http.StatusCreated, &v); err != nil {
		e.t.Fatalf("create computer: %v", err)
	}
	if !strings.HasPrefix(v.ID, "cmp_") {
		e.t.Fatalf("computer id %q lacks cmp_", v.ID)
	}
	return v
}

// get reads a computer and fails unless the answer is 200.
func (e *env) get(key, id string) view {
	e.t.Helper()
	ctx, cancel := callCtx()
	defer cancel()
	v, err := e.apiClient(key).Get(ctx, id)
	if err != nil {
		e.t.Fatalf("get computer %s: %v", id, err)
	}
	return v
}

// execResult is the unary exec answer.
type execResult = client.ExecResult

// exec runs a unary exec (body: a value sent as JSON) and fails unless it
// answers 200.
func (e *env) exec(key, id string, body any) execResult {
	e.t.Helper()
	ctx, cancel := callCtx()
	defer cancel()
	var res execResult
	if _, err := e.apiClient(key).Do(ctx, "POST", "/v1/computers/"+id+"/exec", body, http.StatusOK, &res); err != nil {
		e.t.Fatalf("exec %v: %v", body, err)
	}
	return res
}

// sh runs a shell command that must exit 0 and returns its stdout.
func (e *env) sh(key, id, command string) string {
	e.t.Helper()
	res := e.exec(key, id, map[string]any{"command": command})
	if res.ExitCode != 0 {
		e.t.Fatalf("%q: exit %d\nstdout: %s\nstderr: %s", command, res.ExitCode, res.Stdout, res.Stderr)
	}
	return res.Stdout
}

// newOrg creates an organisation through the admin API.
func (e *env) newOrg(name string, allowComputer bool) string {
	e.t.Helper()
	r := e.do(e.admin, "POST", "/v1/admin/orgs", map[string]any{"name": name, "allow_computer": allowComputer})
	if r.code != http.StatusCreated {
		e.t.Fatalf("create org: %s", r)
	}
	var org struct {
		ID string `json:"id"`
	}
	r.json(e.t, &org)
	return org.ID
}

// computerCaps is the seed's capability set for a key that uses computers.
const computerCaps = `{"tooling":{"system_tools":["computer"]},"computer":{},"files":{},"artifacts":{}}`

// newKey creates a key in org (empty: the admin's org) and returns its id
// and secret.
func (e *env) newKey(org, caps string) (id, secret string) {
	e.t.Helper()
	body := map[string]any{"name": "test", "capabilities": json.RawMessage(caps)}
	if org != "" {
		body["org_id"] = org
	}
	r := e.do(e.admin, "POST", "/v1/admin/keys", body)
	if r.code != http.StatusCreated {
		e.t.Fatalf("create key: %s", r)
	}
	var k struct {
		Key struct {
			ID string `json:"id"`
		} `json:"key"`
		Secret string `json:"secret"`
	}
	r.json(e.t, &k)
	if k.Key.ID == "" || k.Secret == "" {
		e.t.Fatalf("create key: %s", r)
	}
	return k.Key.ID, k.Secret
}

// metric reads one sample of /metrics by its exact name and labels.
func (e *env) metric(name string) float64 {
	e.t.Helper()
	r := e.do("", "GET", "/metrics", nil)
	if r.code != http.StatusOK {
		e.t.Fatalf("metrics: %s", r)
	}
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				e.t.Fatalf("metric %s: %q", name, line)
			}
			return f
		}
	}
	e.t.Fatalf("metric %s missing from:\n%s", name, r.body)
	return 0
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// usageRow and event mirror the store's JSON.
type usageRow struct {
	OrgID      string `json:"org_id"`
	KeyID      string `json:"key_id"`
	ComputerID string `json:"computer_id"`
	Kind       string `json:"kind"`
	Quantity   int64  `json:"quantity"`
}

type event struct {
	OrgID      string         `json:"org_id"`
	KeyID      string         `json:"key_id"`
	Type       string         `json:"type"`
	ComputerID string         `json:"computer_id"`
	Data       map[string]any `json:"data"`
}

func (e *env) usage(key string) []usageRow {
	e.t.Helper()
	r := e.do(key, "GET", "/v1/usage", nil)
	if r.code != http.StatusOK {
		e.t.Fatalf("usage: %s", r)
	}
	var l struct {
		Data []usageRow `json:"data"`
	}
	r.json(e.t, &l)
	return l.Data
}

func (e *env) audit(key, query string) []event {
	e.t.Helper()
	r := e.do(key, "GET", "/v1/audit"+query, nil)
	if r.code != http.StatusOK {
		e.t.Fatalf("audit: %s", r)
	}
	var l struct {
		Data []event `json:"data"`
	}
	r.json(e.t, &l)
	return l.Data
}

// forComputer keeps the rows and events of one computer.
func usageOf(rows []usageRow, id string) []usageRow {
	var out []usageRow
	for _, r := range rows {
		if r.ComputerID == id {
			out = append(out, r)
		}
	}
	return out
}

func eventsOf(evs []event, id, typ string) []event {
	var out []event
	for _, e := range evs {
		if e.ComputerID == id && (typ == "" || e.Type == typ) {
			out = append(out, e)
		}
	}
	return out
}

// adminKeyID is the id of the bootstrap admin key.
func (e *env) adminKeyID() string {
	e.t.Helper()
	r := e.do(e.admin, "GET", "/v1/admin/keys", nil)
	if r.code != http.StatusOK {
		e.t.Fatalf("list keys: %s", r)
	}
	var l struct {
		Data []struct {
			ID    string `json:"id"`
			Admin bool   `json:"admin"`
		} `json:"data"`
	}
	r.json(e.t, &l)
	for _, k := range l.Data {
		if k.Admin {
			return k.ID
		}
	}
	e.t.Fatalf("no admin key in %s", r)
	return ""
}
