package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/config"
	"github.com/cubicle-sandbox/cubicle/internal/responses"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/sandboxtest"
	"github.com/cubicle-sandbox/cubicle/internal/template"
	"github.com/cubicle-sandbox/cubicle/internal/template/templatetest"
)

// templateStore is a template store in dir holding "mini"
// (templatetest.MiniRoot, no Python).
func templateStore(t *testing.T, dir string) *template.Store {
	t.Helper()
	return storeWith(t, dir, "mini", templatetest.MiniRoot(t, t.TempDir(), templatetest.Programs...), "PATH=/usr/bin:/bin", "MINI=1")
}

// storeWith is a template store in dir holding the root directory root
// as the template name, with env.
func storeWith(t *testing.T, dir, name, root string, env ...string) *template.Store {
	t.Helper()
	s, err := template.Open(filepath.Join(dir, "templates"), template.Limits{MaxBytes: 1 << 30, MaxFiles: 100000})
	if err != nil {
		t.Fatal(err)
	}
	templatetest.Import(t, s, name, root, env...)
	return s
}

type templateJSON struct {
	Name      string  `json:"name"`
	Object    string  `json:"object"`
	ID        *string `json:"id"`
	CreatedAt *int64  `json:"created_at"`
	SizeBytes int64   `json:"size_bytes"`
	Python    *string `json:"python"`
	Default   bool    `json:"default"`
}

// TestTemplates: GET /v1/templates lists the host's runtime and the
// store's templates; "template" on POST /v1/computers makes a computer
// from one (its root, its env), an unknown one is a 400 naming the field,
// and a template without Python says so on a python call.
func TestTemplates(t *testing.T) {
	dir := t.TempDir()
	e := newEnvIn(t, dir, func(c *computer.Config) { c.Templates = templateStore(t, dir) })
	_, key := e.newKey(e.newOrg("t", true), computerCaps)

	var list struct {
		Data []templateJSON `json:"data"`
	}
	e.do(key, "GET", "/v1/templates", nil).json(t, &list)
	if len(list.Data) != 2 || list.Data[0].Name != "host" || !list.Data[0].Default || list.Data[0].Python == nil ||
		list.Data[0].ID != nil || list.Data[1].Name != "mini" || list.Data[1].Default || list.Data[1].Python != nil ||
		list.Data[1].ID == nil || !strings.HasPrefix(*list.Data[1].ID, "sha256:") || list.Data[1].SizeBytes == 0 ||
		list.Data[1].Object != "template" {
		t.Fatalf("templates: %+v", list.Data)
	}
	var one templateJSON
	e.do(key, "GET", "/v1/templates/mini", nil).json(t, &one)
	if one.Name != "mini" || one.CreatedAt == nil {
		t.Fatalf("GET mini: %+v", one)
	}
	e.do(key, "GET", "/v1/templates/nope", nil).wantError(t, http.StatusNotFound, "not_found")

	c := e.create(key, map[string]any{"template": "mini"})
	if c.Template != "mini" || e.get(key, c.ID).Template != "mini" {
		t.Fatalf("computer's template %q", c.Template)
	}
	if got := e.sh(key, c.ID, "cat /etc/os-release; echo $MINI; test -e /usr/bin/python3 || echo no-python"); got !=
		templatetest.OSRelease+"1\nno-python\n" {
		t.Fatalf("on mini: %q", got)
	}
	r := e.do(key, "POST", "/v1/computers/"+c.ID+"/python", map[string]any{"cells": []map[string]string{{"code": "1"}}})
	if er := r.wantError(t, http.StatusBadRequest, "invalid_request"); !strings.Contains(er.Error.Message, "template has no Python") {
		t.Fatalf("python on mini: %s", r)
	}
	if h := e.create(key, nil); h.Template != "host" {
		t.Fatalf("a computer that names none is made from %q", h.Template)
	}
	er := e.do(key, "POST", "/v1/computers", map[string]any{"template": "nope"}).wantError(t, http.StatusBadRequest, "invalid_request")
	if er.Error.Param == nil || *er.Error.Param != "template" || !strings.Contains(er.Error.Message, `no template "nope"`) {
		t.Fatalf("unknown template: %+v", er.Error)
	}
}

// TestDefaultTemplate: template.default makes every computer that names
// none from that template, and GET /v1/templates says which it is.
func TestDefaultTemplate(t *testing.T) {
	dir := t.TempDir()
	e := newEnvIn(t, dir, func(c *computer.Config) { c.Templates, c.Template = templateStore(t, dir), "mini" })
	_, key := e.newKey(e.newOrg("t", true), computerCaps)
	c := e.create(key, nil)
	if c.Template != "mini" || e.sh(key, c.ID, "cat /etc/os-release") != templatetest.OSRelease {
		t.Fatalf("default template: %q", c.Template)
	}
	if h := e.create(key, map[string]any{"template": "host"}); h.Template != "host" || e.sh(key, h.ID, "test -e /usr/bin/python3 && echo yes") != "yes\n" {
		t.Fatalf("host template: %+v", h)
	}
	var list struct {
		Data []templateJSON `json:"data"`
	}
	e.do(key, "GET", "/v1/templates", nil).json(t, &list)
	if list.Data[0].Default || !list.Data[1].Default {
		t.Fatalf("default flags: %+v", list.Data)
	}
}

// TestTemplateDebian: a computer made from a Debian template built from
// packages runs the template's programs (Debian's nodejs, absent on the
// host's runtime) and Python cells in the template's own Python and
// ipykernel, in a session kept between calls, after the deployment's
// prelude, guarded.
func TestTemplateDebian(t *testing.T) {
	e := newEnv(t, func(c *computer.Config) { c.Templates, c.Prelude = templatetest.DebianKernel(t), config.DefaultPrelude })
	_, key := e.newKey(e.newOrg("t", true), computerCaps)
	c := e.create(key, map[string]any{"template": "debian-kernel"})
	if got := e.sh(key, c.ID, "node -e 'console.log(6*7)'; cat /etc/debian_version"); !strings.HasPrefix(got, "42\n12.") {
		t.Fatalf("node and debian_version: %q", got)
	}
	py := func(code string) pyResult {
		t.Helper()
		var res pyResult
		e.do(key, "POST", "/v1/computers/"+c.ID+"/python", map[string]any{"cells": []map[string]string{{"code": code}}}).json(t, &res)
		if res.Status != "ok" {
			t.Fatalf("python %q: %+v", code, res)
		}
		return res
	}
	// The deployment's prelude imports numpy, pandas and matplotlib, which
	// the template lacks: on a template it imports what is there.
	if got := py("print('np' in dir(), 'pd' in dir())").Cells[0].stdout(); got != "False False\n" {
		t.Fatalf("the prelude on a template: %q", got)
	}
	py("import sys, ipykernel; x = 6*7")
	if got := py("print(x, sys.executable, ipykernel.__file__)").Cells[0].stdout(); got != "42 /usr/bin/python3 /usr/lib/python3/dist-packages/ipykernel/__init__.py\n" {
		t.Fatalf("the template's Python: %q", got)
	}
}

// TestKeyTemplate: a key's capabilities.computer.template is the template
// of its computers that name none (over template.default); one that does
// not exist is a 400 saying where the name came from.
func TestKeyTemplate(t *testing.T) {
	dir := t.TempDir()
	e := newEnvIn(t, dir, func(c *computer.Config) { c.Templates = templateStore(t, dir) })
	org := e.newOrg("t", true)
	_, mini := e.newKey(org, `{"tooling":{"system_tools":["computer"]},"computer":{"template":"mini"}}`)
	if c := e.create(mini, nil); c.Template != "mini" || e.sh(mini, c.ID, "cat /etc/os-release") != templatetest.OSRelease {
		t.Fatalf("key template: %q", c.Template)
	}
	if c := e.create(mini, map[string]any{"template": "host"}); c.Template != "host" {
		t.Fatalf("the request's template comes first: %q", c.Template)
	}
	var list struct {
		Data []templateJSON `json:"data"`
	}
	e.do(mini, "GET", "/v1/templates", nil).json(t, &list)
	if list.Data[0].Default || !list.Data[1].Default {
		t.Fatalf("default flags for the key: %+v", list.Data)
	}
	_, gone := e.newKey(org, `{"tooling":{"system_tools":["computer"]},"computer":{"template":"gone"}}`)
	er := e.do(gone, "POST", "/v1/computers", nil).wantError(t, http.StatusBadRequest, "invalid_request")
	if er.Error.Param == nil || *er.Error.Param != "template" || !strings.Contains(er.Error.Message, `the key's default template (capabilities.computer.template), "gone"`) {
		t.Fatalf("a key's missing template: %+v", er.Error)
	}
}

// TestCodeInterpreterTemplate: gateway.code_interpreter_template makes the
// code interpreter's computers from that template, whose own Python runs
// the model's code.
func TestCodeInterpreterTemplate(t *testing.T) {
	e := newEnv(t, func(c *computer.Config) { c.Templates = templatetest.DebianKernel(t) })
	up := sixTimesSeven(t)
	e.withGatewayConfig(responses.Config{UpstreamURL: up.srv.URL + "/v1", Model: "test-model", CodeInterpreterTemplate: "debian-kernel"})
	_, key := e.newKey("", computerCaps)
	r := e.do(key, "POST", "/v1/responses", map[string]any{"model": "m1", "input": "What is 6*7? Use code.", "tools": ciTool,
		"include": []string{"code_interpreter_call.outputs"}})
	var out responseObj
	r.json(t, &out)
	if out.Status != "completed" || len(out.Output) != 2 || out.Output[0].Outputs == nil || len(*out.Output[0].Outputs) != 1 {
		t.Fatalf("response: %s", r)
	}
	var o struct{ Type, Logs string }
	json.Unmarshal((*out.Output[0].Outputs)[0], &o)
	if o.Logs != "42" {
		t.Fatalf("outputs: %s", r)
	}
	e.waitDestroyed(key, out.ID)
	if cs := e.computersOf(key, out.ID); len(cs) != 1 || cs[0].Template != "debian-kernel" {
		t.Fatalf("the code interpreter's computer: %+v", cs)
	}
}

// TestTemplatePools: template.pools keeps ready computers of a template
// besides the default's pool, and a create of that template takes one.
func TestTemplatePools(t *testing.T) {
	dir := t.TempDir()
	drv := &sandboxtest.Driver{}
	e := newEnvOn(t, dir, drv, func(c *computer.Config) {
		c.Templates, c.PoolSize, c.TemplatePools = templateStore(t, dir), 1, map[string]int{"mini": 1}
	})
	eventually(t, 10*time.Second, "both pools filled", func() bool { return e.metric("cubicle_pool_depth") == 2 })
	var pooled string
	for _, sb := range drv.Sandboxes() {
		if sb.SpecValue.Root.Template == "mini" {
			pooled = sb.IDValue
			if !slices.Contains(sb.SpecValue.Env, "MINI=1") || !strings.HasSuffix(sb.SpecValue.Root.Image, "root.erofs") {
				t.Fatalf("the mini pool's spec: %+v", sb.SpecValue)
			}
		}
	}
	_, key := e.newKey(e.newOrg("t", true), computerCaps)
	if c := e.create(key, map[string]any{"template": "mini"}); pooled == "" || c.ID != pooled || c.Template != "mini" {
		t.Fatalf("created %s (%s), want the pooled %s", c.ID, c.Template, pooled)
	}
	if c := e.create(key, nil); c.Template != "host" || c.ID == pooled {
		t.Fatalf("a host computer: %+v", c)
	}
}

// TestTemplateAdmin: an admin builds a template over the API (a spec on a
// base; streamed progress with Accept: text/event-stream) and deletes it
// once no running or paused computer was made from it (409 naming them
// before); bad specs are 400 naming
// the field, other keys 403.
func TestTemplateAdmin(t *testing.T) {
	dir := t.TempDir()
	e := newEnvIn(t, dir, func(c *computer.Config) { c.Templates = templateStore(t, dir) })
	_, key := e.newKey(e.newOrg("t", true), computerCaps)
	body := map[string]any{"name": "mini2", "spec": map[string]any{"base": "mini", "env": []string{"MINI=2"}}}
	e.do(key, "POST", "/v1/templates", body).wantError(t, http.StatusForbidden, "forbidden")

	r := e.do(e.admin, "POST", "/v1/templates", body)
	var made templateJSON
	if r.code != http.StatusCreated {
		t.Fatalf("build: %s", r)
	}
	r.json(t, &made)
	if made.Name != "mini2" || made.ID == nil {
		t.Fatalf("built %+v", made)
	}
	c := e.create(key, map[string]any{"template": "mini2"})
	if got := e.sh(key, c.ID, "echo $MINI; cat /etc/os-release"); got != "2\n"+templatetest.OSRelease {
		t.Fatalf("on mini2: %q", got)
	}
	er := e.do(e.admin, "DELETE", "/v1/templates/mini2", nil).wantError(t, http.StatusConflict, "template_in_use")
	if !strings.Contains(er.Error.Message, "computers made from mini2 exist: "+c.ID+";") {
		t.Fatalf("in use: %+v", er.Error)
	}
	// A paused computer needs its template to resume: still in use.
	if r := e.do(key, "POST", "/v1/computers/"+c.ID+"/pause", nil); r.code != http.StatusOK {
		t.Fatalf("pause: %s", r)
	}
	er = e.do(e.admin, "DELETE", "/v1/templates/mini2", nil).wantError(t, http.StatusConflict, "template_in_use")
	if !strings.Contains(er.Error.Message, c.ID+" (paused)") {
		t.Fatalf("in use by a paused computer: %+v", er.Error)
	}
	if r := e.do(key, "POST", "/v1/computers/"+c.ID+"/resume", nil); r.code != http.StatusOK {
		t.Fatalf("resume: %s", r)
	}
	if got := e.sh(key, c.ID, "echo $MINI"); got != "2\n" {
		t.Fatalf("resumed on mini2: %q", got)
	}
	if r := e.do(key, "DELETE", "/v1/computers/"+c.ID, nil); r.code != http.StatusNoContent {
		t.Fatalf("delete computer: %s", r)
	}
	if r := e.do(e.admin, "DELETE", "/v1/templates/mini2", nil); r.code != http.StatusNoContent {
		t.Fatalf("delete template: %s", r)
	}
	e.do(e.admin, "DELETE", "/v1/templates/mini2", nil).wantError(t, http.StatusNotFound, "not_found")
	e.do(e.admin, "DELETE", "/v1/templates/host", nil).wantError(t, http.StatusBadRequest, "invalid_request")

	// Streamed: progress events, then the template.
	r = e.doCtx(context.Background(), e.admin, "POST", "/v1/templates", body, map[string]string{"Accept": "text/event-stream"})
	if s := string(r.body); r.code != 200 || !strings.Contains(s, "event: progress\ndata: {\"step\":\"layer\"") ||
		!strings.Contains(s, "event: progress\ndata: {\"step\":\"root\"") || !strings.Contains(s, "event: template\ndata: {\"name\":\"mini2\"") {
		t.Fatalf("streamed build: %s", r)
	}
	for _, c := range []struct {
		body  any
		code  int
		param string
		want  string
	}{
		{body, http.StatusConflict, "", `template "mini2" exists; remove it first ('cubicle template rm mini2') or pass --replace ("replace": true)`},
		{map[string]any{"name": "x", "spec": map[string]any{"base": "mini", "files": []any{map[string]string{"src": "/etc", "dst": "/x"}}}}, 400, "spec", "files copy host paths"},
		{map[string]any{"name": "x", "spec": map[string]any{"base": "gone"}}, 400, "spec", `no template "gone"`},
		{map[string]any{"name": "x", "spec": map[string]any{"bass": "mini"}}, 400, "spec", `unknown field "bass"`},
		{map[string]any{"name": "Bad Name", "spec": map[string]any{"base": "mini"}}, 400, "name", `template name "Bad Name"`},
		{map[string]any{"name": "x"}, 400, "spec", "give exactly one of spec"},
	} {
		r := e.do(e.admin, "POST", "/v1/templates", c.body)
		var er apiErr
		r.json(t, &er)
		if r.code != c.code || !strings.Contains(er.Error.Message, c.want) {
			t.Errorf("%v: %s, want %d and %q", c.body, r, c.code, c.want)
			continue
		}
		if c.param != "" && (er.Error.Param == nil || *er.Error.Param != c.param) {
			t.Errorf("%v: param %v, want %s", c.body, er.Error.Param, c.param)
		}
	}
}

// TestTemplateSourcesRunPython: templates imported from an OCI image
// layout and pulled from a registry (here the Debian kernel template's
// layer as an image: its layer and root are found stored) make computers
// that run programs and Python cells in the template's own kernel.
func TestTemplateSourcesRunPython(t *testing.T) {
	st := templatetest.DebianKernel(t)
	img := templatetest.DebianKernelImage(t)
	ctx := context.Background()
	t.Cleanup(func() { // they share the cache store's layer and root: removing them collects nothing
		st.Remove(context.Background(), "debian-oci")
		st.Remove(context.Background(), "debian-pulled")
	})
	if _, err := st.Import(ctx, templatetest.Layout(t, img), template.Options{Name: "debian-oci", Replace: true}); err != nil {
		t.Fatal(err)
	}
	ref := templatetest.Registry(t, img)
	if _, err := st.Pull(ctx, ref, template.Options{Name: "debian-pulled", Replace: true}); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(c *computer.Config) { c.Templates = st })
	_, key := e.newKey(e.newOrg("t", true), computerCaps)
	for _, name := range []string{"debian-oci", "debian-pulled"} {
		c := e.create(key, map[string]any{"template": name})
		if got := e.sh(key, c.ID, "node -e 'console.log(6*7)'"); got != "42\n" {
			t.Fatalf("%s: node: %q", name, got)
		}
		var res pyResult
		e.do(key, "POST", "/v1/computers/"+c.ID+"/python", map[string]any{"cells": []map[string]string{{"code": "import sys; print(sys.executable)"}}}).json(t, &res)
		if res.Status != "ok" || res.Cells[0].stdout() != "/usr/bin/python3\n" {
			t.Fatalf("%s: python: %+v", name, res)
		}
	}
}

// TestTemplatePipInstallUser: on a Debian template with Debian's
// python3-pip (not the host's runtime), pip install --user of a local
// package (no PyPI here) writes to the workspace, the computer's writable
// layer, past Debian's "externally managed" refusal (the computer's
// PIP_BREAK_SYSTEM_PACKAGES), and the template's Python imports it; the
// root stays read-only.
func TestTemplatePipInstallUser(t *testing.T) {
	e := newEnv(t, func(c *computer.Config) { c.Templates = templatetest.DebianPip(t) })
	_, key := e.newKey(e.newOrg("t", true), computerCaps)
	c := e.create(key, map[string]any{"template": templatetest.DebianPipName})
	e.sh(key, c.ID, `mkdir -p /workspace/src/hello && cd /workspace/src/hello &&
printf 'from setuptools import setup\nsetup(name="cubicle-hello", version="1.0", py_modules=["cubicle_hello"])\n' > setup.py &&
printf 'def greet():\n    return "hello from the workspace"\n' > cubicle_hello.py`)
	const install = "python3 -m pip install --user --no-index --no-build-isolation /workspace/src/hello 2>&1"
	if got := e.sh(key, c.ID, "cd /tmp && env -u PIP_BREAK_SYSTEM_PACKAGES "+install+"; echo exit $?"); !strings.Contains(got, "externally-managed-environment") || strings.HasSuffix(got, "exit 0\n") {
		t.Fatalf("control, without PIP_BREAK_SYSTEM_PACKAGES: %q", got)
	}
	if got := e.sh(key, c.ID, "cd /tmp && "+install+"; echo exit $?"); !strings.Contains(got, "Successfully installed cubicle-hello-1.0") || !strings.HasSuffix(got, "exit 0\n") {
		t.Fatalf("pip install --user: %q", got)
	}
	if got := e.sh(key, c.ID, "cd / && python3 -c 'import cubicle_hello, pip; print(cubicle_hello.greet(), cubicle_hello.__file__, pip.__file__)'"); !strings.HasPrefix(got, "hello from the workspace /workspace/.local/lib/python3.11/site-packages/cubicle_hello.py /usr/lib/python3/dist-packages/pip/") {
		t.Fatalf("import after install: %q", got)
	}
	if got := e.sh(key, c.ID, "python3 -m pip install --no-index --no-build-isolation --prefix /usr/local /workspace/src/hello >/dev/null 2>&1; echo exit $?; touch /usr/x 2>&1 || true"); !strings.HasPrefix(got, "exit 1\n") || !strings.Contains(got, "Read-only file system") {
		t.Fatalf("a system install: %q", got)
	}
}

// TestTemplateDefaults: a template's defaults (its spec's "defaults")
// are shown in GET /v1/templates/{name} and applied at create: its
// limits when the request gives none (a request's own win, the key's
// limits and the deployment's caps bound both), its prelude instead of
// the deployment's in the kernel, and its network policy only where
// internet is allowed (not on this deployment: the computer has none).
func TestTemplateDefaults(t *testing.T) {
	st := templatetest.DebianKernel(t)
	build := func(name, defaults string) {
		t.Helper()
		sp, err := template.ParseSpec([]byte(`{"base": "`+templatetest.DebianKernelName+`", "defaults": `+defaults+`}`), "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.BuildSpec(t.Context(), sp, "test", false, template.Options{Name: name, Replace: true}); err != nil {
			t.Fatal(err)
		}
	}
	build("kernel-defaults", `{"memory_mb": 128, "exec_timeout_seconds": 7, "lifetime_seconds": 120,
		"prelude": "import json as template_json\nMARK = 6*7\n", "network_policy": {"type": "allowlist", "allowed_domains": ["allowed.test"]}}`)
	build("kernel-big", `{"memory_mb": 100000, "lifetime_seconds": 100000}`)
	e := newEnv(t, func(c *computer.Config) { c.Templates, c.Prelude = st, config.DefaultPrelude })
	org := e.newOrg("t", true)
	_, key := e.newKey(org, computerCaps)

	var got struct {
		Defaults struct {
			MemoryMB      int    `json:"memory_mb"`
			Prelude       string `json:"prelude"`
			NetworkPolicy struct {
				AllowedDomains []string `json:"allowed_domains"`
			} `json:"network_policy"`
		} `json:"defaults"`
	}
	e.do(key, "GET", "/v1/templates/kernel-defaults", nil).json(t, &got)
	if got.Defaults.MemoryMB != 128 || !strings.Contains(got.Defaults.Prelude, "MARK = 6*7") || len(got.Defaults.NetworkPolicy.AllowedDomains) != 1 {
		t.Fatalf("GET kernel-defaults: %+v", got)
	}
	limits := func(c view) string {
		return fmt.Sprintf("memory %d, exec %d, lifetime %d", c.Limits.MemoryMB, c.Limits.ExecTimeoutSeconds, c.Limits.LifetimeSeconds)
	}
	c := e.create(key, map[string]any{"template": "kernel-defaults"})
	if l := limits(c); l != "memory 128, exec 7, lifetime 120" {
		t.Fatalf("the template's defaults: %s", l)
	}
	if r := e.do(key, "GET", "/v1/computers/"+c.ID, nil); r.code != http.StatusOK || strings.Contains(r.String(), "allowed.test") {
		t.Fatalf("the template's network policy on a deployment without internet: %s", r)
	}
	var res pyResult
	e.do(key, "POST", "/v1/computers/"+c.ID+"/python", map[string]any{"cells": []map[string]string{{"code": "print(MARK, template_json.__name__, 'np' in dir())"}}}).json(t, &res)
	if res.Status != "ok" || res.Cells[0].stdout() != "42 json False\n" {
		t.Fatalf("the template's prelude: %+v", res)
	}
	// The request's own values win, within the deployment's caps (memory
	// 256 MiB, lifetime 600 s, exec 30 s).
	if l := limits(e.create(key, map[string]any{"template": "kernel-defaults", "memory_mb": 200, "lifetime_seconds": 300, "exec_timeout_seconds": 9000})); l != "memory 200, exec 30, lifetime 300" {
		t.Fatalf("a request's limits over the template's: %s", l)
	}
	if l := limits(e.create(key, map[string]any{"template": "kernel-big"})); l != "memory 256, exec 30, lifetime 600" {
		t.Fatalf("a template's defaults above the deployment's caps: %s", l)
	}
	_, small := e.newKey(org, `{"tooling":{"system_tools":["computer"]},"computer":{"lifetime_seconds":60,"exec_timeout_seconds":5},"files":{},"artifacts":{}}`)
	if l := limits(e.create(small, map[string]any{"template": "kernel-defaults"})); l != "memory 128, exec 5, lifetime 60" {
		t.Fatalf("a template's defaults above the key's limits: %s", l)
	}
	for defaults, want := range map[string]string{
		`{"prelude": "def (:"}`:                         "defaults.prelude does not compile: SyntaxError",
		`{"memory_mb": 8}`:                              "defaults.memory_mb: 8 is not between 32 and",
		`{"network_policy": {"type": "disabled"}}`:      `defaults.network_policy.type must be "allowlist"`,
		`{"lifetime_seconds": 60, "working_dir": "/x"}`: `unknown field "working_dir"`,
	} {
		r := e.do(e.admin, "POST", "/v1/templates", map[string]any{"name": "bad", "spec": json.RawMessage(`{"base": "kernel-big", "defaults": ` + defaults + `}`)})
		if er := r.wantError(t, http.StatusBadRequest, "invalid_request"); !strings.Contains(er.Error.Message, want) {
			t.Errorf("%s: %s (want %q)", defaults, er.Error.Message, want)
		}
	}
}
