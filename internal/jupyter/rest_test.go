package jupyter

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/governance"
)

// TestAuth: Jupyter's "token" scheme and Bearer work; a missing or wrong
// key is 401, a key that may not use computers 403; ?token= only opens
// WebSockets.
func TestAuth(t *testing.T) {
	e := newFakeEnv(t, Config{})
	for _, auth := range []string{"token " + e.key, "Bearer " + e.key} {
		if r := doReq(t, e.url, auth, "GET", "/api/kernelspecs", nil); r.code != http.StatusOK {
			t.Fatalf("%s: %s", auth[:6], r)
		}
	}
	for _, auth := range []string{"", "token nope", "token " + e.key + "x", "Basic " + e.key} {
		r := doReq(t, e.url, auth, "GET", "/api/kernels", nil)
		if r.code != http.StatusUnauthorized {
			t.Fatalf("auth %q: %s, want 401", auth, r)
		}
		var body struct{ Message, Reason string }
		if json.Unmarshal(r.body, &body) != nil || body.Reason != "invalid_api_key" || body.Message == "" {
			t.Fatalf("401 body %s", r)
		}
	}
	if r := doReq(t, e.url, "", "GET", "/api/kernels?token="+e.key, nil); r.code != http.StatusUnauthorized {
		t.Fatalf("?token= on REST: %s, want 401", r)
	}
	noComputerOrg := e.newKey(false, governance.AllCapabilities())
	noComputerKey := e.newKey(true, governance.Capabilities{Files: governance.AllCapabilities().Files})
	for _, k := range []string{noComputerOrg, noComputerKey} {
		for _, path := range []string{"/api/kernelspecs", "/api/kernels"} {
			if r := doReq(t, e.url, "token "+k, "GET", path, nil); r.code != http.StatusForbidden {
				t.Fatalf("GET %s without computers: %s, want 403", path, r)
			}
		}
	}
}

// TestKernelspecs: the one spec, in the shape jupyter_server's gateway
// client passes through.
func TestKernelspecs(t *testing.T) {
	e := newFakeEnv(t, Config{})
	var all struct {
		Default     string `json:"default"`
		Kernelspecs map[string]struct {
			Name string `json:"name"`
			Spec struct {
				Argv          []string          `json:"argv"`
				DisplayName   string            `json:"display_name"`
				Language      string            `json:"language"`
				InterruptMode string            `json:"interrupt_mode"`
				Env           map[string]string `json:"env"`
				Metadata      map[string]any    `json:"metadata"`
			} `json:"spec"`
			Resources map[string]string `json:"resources"`
		} `json:"kernelspecs"`
	}
	r := e.do("GET", "/api/kernelspecs", nil)
	if err := json.Unmarshal(r.body, &all); err != nil || r.code != 200 {
		t.Fatalf("%s %v", r, err)
	}
	ks, ok := all.Kernelspecs["python3"]
	if all.Default != "python3" || !ok || len(all.Kernelspecs) != 1 || ks.Name != "python3" || ks.Spec.DisplayName != "Python 3 (Cubicle)" ||
		ks.Spec.Language != "python" || ks.Spec.InterruptMode != "signal" || ks.Spec.Env == nil || ks.Resources == nil || len(ks.Spec.Argv) == 0 {
		t.Fatalf("kernelspecs %s", r)
	}
	if r := e.do("GET", "/api/kernelspecs/python3", nil); r.code != 200 || !json.Valid(r.body) {
		t.Fatalf("one spec: %s", r)
	}
	for _, path := range []string{"/api/kernelspecs/ruby", "/kernelspecs/python3/logo-64x64.png"} {
		if r := e.do("GET", path, nil); r.code != http.StatusNotFound {
			t.Fatalf("GET %s: %s, want 404", path, r)
		}
	}
}

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// TestKernelLifecycle: start (a computer of its own, the client's env
// filtered), get, list, interrupt, restart, delete (the computer goes),
// and another organisation sees nothing.
func TestKernelLifecycle(t *testing.T) {
	e := newFakeEnv(t, Config{})
	before := time.Now().UTC().Add(-time.Second)
	k := startKernel(t, e.url, e.key, map[string]string{"OPENAI_API_KEY": "sk-secret", "LANG": "C.UTF-8",
		"KERNEL_USERNAME": "ann", "HOME": "/root", "PATH": "/host/bin"})
	if !uuidRE.MatchString(k.ID) || k.Name != "python3" || k.ExecutionState != "idle" || k.Connections != 0 {
		t.Fatalf("model %+v", k)
	}
	at, err := time.Parse("2006-01-02T15:04:05.000000Z", k.LastActivity)
	if err != nil || at.Before(before) {
		t.Fatalf("last_activity %q: %v", k.LastActivity, err)
	}
	sb := e.drv.last()
	if start := sb.lastStart(); !slices.Equal(start.Env, []string{"KERNEL_USERNAME=ann", "LANG=C.UTF-8"}) || start.Cwd != "" {
		t.Fatalf("the kernel started with %+v", start)
	}
	k2 := startKernel(t, e.url, e.key, nil)
	if k2.ID == k.ID || e.drv.last() == sb {
		t.Fatal("two kernels share a computer")
	}
	var list []model
	if r := e.do("GET", "/api/kernels", nil); json.Unmarshal(r.body, &list) != nil || len(list) != 2 {
		t.Fatalf("list: %s", r)
	}
	if r := e.do("POST", "/api/kernels/"+k.ID+"/interrupt", map[string]any{}); r.code != http.StatusNoContent || sb.kernel.interrupts.Load() != 1 {
		t.Fatalf("interrupt: %s (%d interrupts)", r, sb.kernel.interrupts.Load())
	}
	r := e.do("POST", "/api/kernels/"+k.ID+"/restart", map[string]any{})
	var m model
	if r.code != http.StatusOK || json.Unmarshal(r.body, &m) != nil || m.ID != k.ID || sb.kernel.restarts.Load() != 1 {
		t.Fatalf("restart: %s", r)
	}

	other := e.newKey(true, governance.AllCapabilities())
	for _, c := range []struct{ method, path string }{{"GET", ""}, {"DELETE", ""}, {"POST", "/interrupt"}, {"POST", "/restart"}} {
		if r := doReq(t, e.url, "token "+other, c.method, "/api/kernels/"+k.ID+c.path, nil); r.code != http.StatusNotFound {
			t.Fatalf("another org: %s %s: %s, want 404", c.method, c.path, r)
		}
	}
	if r := doReq(t, e.url, "token "+other, "GET", "/api/kernels", nil); string(r.body) != "[]\n" {
		t.Fatalf("another org lists %s", r)
	}

	if r := e.do("DELETE", "/api/kernels/"+k.ID, nil); r.code != http.StatusNoContent {
		t.Fatalf("delete: %s", r)
	}
	if !sb.destroyed.Load() {
		t.Fatal("DELETE left the kernel's computer running")
	}
	if r := e.do("GET", "/api/kernels/"+k.ID, nil); r.code != http.StatusNotFound {
		t.Fatalf("GET after delete: %s", r)
	}
	if r := e.do("DELETE", "/api/kernels/"+k.ID, nil); r.code != http.StatusNotFound {
		t.Fatalf("second delete: %s", r)
	}
	if r := e.do("POST", "/api/kernels", map[string]any{"name": "ruby"}); r.code != http.StatusNotFound {
		t.Fatalf("unknown kernel name: %s", r)
	}
	if r := e.do("POST", "/api/kernels", "nope"); r.code != http.StatusBadRequest {
		t.Fatalf("bad body: %s", r)
	}
}

// TestKernelComputerMetadata: the computer records its kernel id, so the
// computers API shows which kernel a computer runs.
func TestKernelComputerMetadata(t *testing.T) {
	e := newFakeEnv(t, Config{})
	k := startKernel(t, e.url, e.key, nil)
	p, err := e.gov.Authenticate(t.Context(), e.key)
	if err != nil {
		t.Fatal(err)
	}
	v, err := e.mgr.Get(t.Context(), p, e.drv.last().ID())
	if err != nil || v.Metadata[KernelMetadataKey] != k.ID {
		t.Fatalf("computer %+v: %v", v, err)
	}
}

// TestComputerGone: a kernel whose computer was deleted (or reaped) is 404.
func TestComputerGone(t *testing.T) {
	e := newFakeEnv(t, Config{})
	k := startKernel(t, e.url, e.key, nil)
	p, _ := e.gov.Authenticate(t.Context(), e.key)
	if err := e.mgr.Delete(t.Context(), p, e.drv.last().ID()); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the kernel is gone", func() bool {
		return e.do("GET", "/api/kernels/"+k.ID, nil).code == http.StatusNotFound
	})
	if r := e.do("GET", "/api/kernels", nil); string(r.body) != "[]\n" {
		t.Fatalf("list: %s", r)
	}
}

// TestCulling: a kernel without connections and activity is deleted after
// the idle time; one with a connection stays.
func TestCulling(t *testing.T) {
	e := newFakeEnv(t, Config{CullIdle: 500 * time.Millisecond})
	idle := startKernel(t, e.url, e.key, nil)
	idleSB := e.drv.last()
	held := startKernel(t, e.url, e.key, nil)
	dialChannels(t, e.url, e.key, held.ID)
	eventually(t, 10*time.Second, "the idle kernel is culled", func() bool {
		return e.do("GET", "/api/kernels/"+idle.ID, nil).code == http.StatusNotFound
	})
	eventually(t, 5*time.Second, "the culled kernel's computer is destroyed", idleSB.destroyed.Load)
	time.Sleep(600 * time.Millisecond)
	var m model
	r := e.do("GET", "/api/kernels/"+held.ID, nil)
	if r.code != 200 || json.Unmarshal(r.body, &m) != nil || m.Connections != 1 {
		t.Fatalf("the connected kernel: %s", r)
	}
}

// TestRestartDeadKernel: a relay that ended (the kernel crashed too often)
// leaves the kernel "dead" while its computer runs; a restart opens a
// fresh relay in the same computer.
func TestRestartDeadKernel(t *testing.T) {
	e := newFakeEnv(t, Config{})
	k := startKernel(t, e.url, e.key, map[string]string{"LANG": "C.UTF-8"})
	sb := e.drv.last()
	sb.kernel.end(errFake)
	eventually(t, 5*time.Second, "the kernel is dead", func() bool {
		var m model
		json.Unmarshal(e.do("GET", "/api/kernels/"+k.ID, nil).body, &m)
		return m.ExecutionState == "dead"
	})
	if r := e.do("POST", "/api/kernels/"+k.ID+"/interrupt", nil); r.code != http.StatusConflict {
		t.Fatalf("interrupt a dead kernel: %s", r)
	}
	r := e.do("POST", "/api/kernels/"+k.ID+"/restart", map[string]any{})
	var m model
	if r.code != http.StatusOK || json.Unmarshal(r.body, &m) != nil || m.ExecutionState != "idle" {
		t.Fatalf("restart: %s", r)
	}
	sb.mu.Lock()
	starts := len(sb.starts)
	sb.mu.Unlock()
	if starts != 2 || !slices.Equal(sb.lastStart().Env, []string{"LANG=C.UTF-8"}) || e.drv.last() != sb {
		t.Fatalf("%d starts, last %+v", starts, sb.lastStart())
	}
	ws := dialChannels(t, e.url, e.key, k.ID)
	if reply, _ := ws.execute("1+1", false); reply.status() != "ok" {
		t.Fatalf("after the restart: %+v", reply)
	}
}

// TestStartBodyStrict (issue 10 item 11): POST /api/kernels accepts fields
// it does not know, as jupyter_server does, but refuses with 400 naming
// the field a duplicate key and a known field (name, path, env) in another
// case, which encoding/json alone would take.
func TestStartBodyStrict(t *testing.T) {
	e := newFakeEnv(t, Config{})
	for body, want := range map[string]string{
		`{"name":"python3","name":"python3"}`:    `duplicate field \"name\"`,
		`{"env":{"A":"1","A":"2"}}`:              `duplicate field \"env.A\"`,
		`{"Name":"python3"}`:                     `unknown field \"Name\" (field names are case-sensitive: \"name\")`,
		`{"PATH":"work/nb.ipynb"}`:               `\"path\"`,
		`{"Env":{"LANG":"C.UTF-8"}}`:             `\"env\"`,
		`{"name":"python3","env":["LANG=C"]}`:    `env must be an object`,
		`{"name":"python3","env":{"A":1}}`:       `env.A must be a string`,
		`{"name":"python3","name":"ruby","x":1}`: `duplicate field \"name\"`,
	} {
		r := e.do("POST", "/api/kernels", json.RawMessage(body))
		if r.code != http.StatusBadRequest || !strings.Contains(string(r.body), want) {
			t.Errorf("%s: %s, want 400 saying %s", body, r, want)
		}
	}
	r := e.do("POST", "/api/kernels", json.RawMessage(`{"name":"python3","path":"work/nb.ipynb","type":"notebook","kernel":{"id":null}}`))
	if r.code != http.StatusCreated {
		t.Fatalf("unknown fields and path: %s, want 201 as jupyter_server", r)
	}
}
