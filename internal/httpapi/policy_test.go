package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/httpapi"
	"github.com/cubicle-sandbox/cubicle/internal/jupyter"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/sandboxtest"
	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// deniedSentence is the seed's fixed sentence.
const deniedSentence = "Denied by policy."

// wantDenied checks the 403 of a call refused by policy: code
// denied_by_policy and exactly the seed's sentence.
func (r resp) wantDenied(t *testing.T) {
	t.Helper()
	e := r.wantError(t, http.StatusForbidden, "denied_by_policy")
	if e.Error.Message != deniedSentence {
		t.Fatalf("message %q, want %q: %s", e.Error.Message, deniedSentence, r)
	}
}

// newPolicyOrg creates an organisation with a policy (nil: none) and the
// switch computer_internet, and a computer key in it.
func (e *env) newPolicyOrg(policy string, internet bool) (org, key string) {
	e.t.Helper()
	body := map[string]any{"name": "p", "computer_internet": internet}
	if policy != "" {
		body["policy"] = json.RawMessage(policy)
	}
	r := e.do(e.admin, "POST", "/v1/admin/orgs", body)
	if r.code != http.StatusCreated {
		e.t.Fatalf("create org: %s", r)
	}
	var o struct {
		ID string `json:"id"`
	}
	r.json(e.t, &o)
	_, key = e.newKey(o.ID, computerCaps)
	return o.ID, key
}

// computersIn is every computer record of an organisation (the store:
// what was created, whatever the API lets the org see).
func (e *env) computersIn(org string) []store.Computer {
	e.t.Helper()
	cs, err := e.st.Computers().List(context.Background(), store.ComputerFilter{OrgID: org})
	if err != nil {
		e.t.Fatal(err)
	}
	return cs
}

// netView is a computer's view with its network policy.
type netView struct {
	ID     string `json:"id"`
	Limits struct {
		NetworkPolicy *struct {
			Type           string   `json:"type"`
			AllowedDomains []string `json:"allowed_domains"`
		} `json:"network_policy"`
	} `json:"limits"`
}

// createNet is create, answering the view with its network policy.
func (e *env) createNet(key string, body any) netView {
	e.t.Helper()
	r := e.do(key, "POST", "/v1/computers", body)
	if r.code != http.StatusCreated {
		e.t.Fatalf("create computer: %s", r)
	}
	var v netView
	r.json(e.t, &v)
	return v
}

// deniedEvents are the org's computer.denied_by_policy audit rows.
func (e *env) deniedEvents(key string) []event {
	return e.audit(key, "?type="+computer.AuditDeniedByPolicy)
}

// TestDeniedByPolicyRegion: an organisation or key whose regions_allow
// does not list the deployment's region gets no computer: every computer
// call answers 403 "Denied by policy.", nothing is created, and each
// refusal is an audit row; builtin:computer as a region exception, or the
// region in the list, allows computers; delete still stops what runs.
func TestDeniedByPolicyRegion(t *testing.T) {
	e := newEnv(t, func(c *computer.Config) { c.Region = "eu-west" })
	org, key := e.newPolicyOrg(`{"settings":{"regions_allow":["us-east","eu-central"]}}`, false)

	e.do(key, "POST", "/v1/computers", map[string]any{}).wantDenied(t)
	if cs := e.computersIn(org); len(cs) != 0 {
		t.Fatalf("%s\na refused create left computers: %+v", seedRegionOutside, cs)
	}
	evs := e.deniedEvents(key)
	if len(evs) != 1 || evs[0].ComputerID != "" || evs[0].Data["policy"] != "organisation" ||
		evs[0].Data["setting"] != "regions_allow" || !strings.Contains(evs[0].Data["reason"].(string), `"eu-west"`) {
		t.Fatalf("audit: %+v", evs)
	}
	e.do(key, "GET", "/v1/computers", nil).wantDenied(t)

	// The exception allows computers without opening the region.
	e.patchOrg(org, `{"policy":{"settings":{"regions_allow":["us-east"],"region_exceptions":["builtin:computer"]}}}`)
	c := e.create(key, nil)
	if out := e.sh(key, c.ID, "echo up"); out != "up\n" {
		t.Fatalf("%s\nexec with the exception: %q", seedRegionException, out)
	}

	// Restricted again: every call on the running computer is refused,
	// the tools tell the model the sentence, and delete still works.
	e.patchOrg(org, `{"policy":{"settings":{"regions_allow":["us-east"]}}}`)
	before := len(e.deniedEvents(key))
	e.do(key, "POST", "/v1/computers/"+c.ID+"/exec", map[string]any{"command": "echo no"}).wantDenied(t)
	e.do(key, "PUT", "/v1/computers/"+c.ID+"/files/x.txt", "data").wantDenied(t)
	e.do(key, "GET", "/v1/computers/"+c.ID+"/files", nil).wantDenied(t)
	e.do(key, "POST", "/v1/computers/"+c.ID+"/python", map[string]any{"cells": []any{map[string]any{"code": "1"}}}).wantDenied(t)
	e.do(key, "GET", "/v1/computers/"+c.ID, nil).wantDenied(t)
	r := e.do(key, "POST", "/v1/computers/"+c.ID+"/tools/builtin__computer_exec", map[string]any{"arguments": map[string]any{"command": "echo no"}})
	var tool struct {
		Output  string `json:"output"`
		IsError bool   `json:"is_error"`
	}
	r.json(t, &tool)
	if r.code != http.StatusOK || tool.Output != deniedSentence || !tool.IsError {
		t.Fatalf("a tool call: %s", r)
	}
	evs = e.deniedEvents(key)
	if len(evs)-before != 6 {
		t.Fatalf("%d refusals audited, want 6: %+v", len(evs)-before, evs)
	}
	for _, ev := range evs[before:] { // oldest first
		if ev.ComputerID != c.ID || ev.Data["setting"] != "regions_allow" {
			t.Fatalf("audit row %+v", ev)
		}
	}
	if r := e.do(key, "DELETE", "/v1/computers/"+c.ID, nil); r.code != http.StatusNoContent {
		t.Fatalf("delete under a refusing policy: %s", r)
	}

	// The region in the list allows computers.
	e.patchOrg(org, `{"policy":{"settings":{"regions_allow":["EU-West"]}}}`)
	e.create(key, nil)

	// The key's own policy refuses too, whatever the organisation's.
	kid, ksec := e.newKey(org, computerCaps)
	e.patchKey(kid, `{"policy":{"settings":{"regions_allow":["us-east"]}}}`, http.StatusOK)
	e.do(ksec, "POST", "/v1/computers", map[string]any{}).wantDenied(t)
	if evs := e.deniedEvents(ksec); evs[len(evs)-1].KeyID != kid || evs[len(evs)-1].Data["policy"] != "key" {
		t.Fatalf("the key's refusal: %+v", evs[len(evs)-1])
	}
	if n := len(e.computersIn(org)); n != 2 {
		t.Fatalf("%d computers in the org, want 2 (the exception's and the listed region's)", n)
	}
}

// TestDeniedByPolicyNoRegion: a deployment without computers.region is in
// no regions_allow list; the exception still allows computers.
func TestDeniedByPolicyNoRegion(t *testing.T) {
	e := newEnv(t, nil)
	_, key := e.newPolicyOrg(`{"settings":{"regions_allow":["eu-west"]}}`, false)
	e.do(key, "POST", "/v1/computers", map[string]any{}).wantDenied(t)
	_, key = e.newPolicyOrg(`{"settings":{"regions_allow":["eu-west"],"region_exceptions":["builtin:computer"]}}`, false)
	e.create(key, nil)
}

func (e *env) patchOrg(org, body string) {
	e.t.Helper()
	if r := e.do(e.admin, "PATCH", "/v1/admin/orgs/"+org, body); r.code != http.StatusOK {
		e.t.Fatalf("patch org: %s", r)
	}
}

func (e *env) patchKey(key, body string, code int) resp {
	e.t.Helper()
	r := e.do(e.admin, "PATCH", "/v1/admin/keys/"+key, body)
	if r.code != code {
		e.t.Fatalf("patch key: %s, want %d", r, code)
	}
	return r
}

// TestInternetWithheldByPolicy: with the switch on and a deployment that
// gives internet, a policy that names regions (even with the exception)
// or providers, restricts hosts or redacts personal data, at the
// organisation or the key, gets a computer without a network instead of
// the internet computer it asked for (audited computer.internet_withheld).
func TestInternetWithheldByPolicy(t *testing.T) {
	e := newEnv(t, func(c *computer.Config) {
		c.Region = "eu-west"
		c.Internet = computer.Internet{Enabled: true, Domains: []string{"*"}}
	})
	asks := map[string]any{"network_policy": map[string]any{"type": "allowlist", "allowed_domains": []string{"pypi.org"}}}
	for policy, setting := range map[string]string{
		`{"settings":{"regions_allow":["eu-west"],"region_exceptions":["builtin:computer"]}}`: "regions_allow",
		`{"settings":{"providers_allow":["openai"]}}`:                                         "providers_allow",
		`{"settings":{"hosts_allow":["api.example.com"]}}`:                                    "hosts_allow",
		`{"settings":{"redact_pii":true}}`:                                                    "redact_pii",
	} {
		for _, level := range []string{"organisation", "key"} {
			org, key := e.newPolicyOrg(policy, true)
			if level == "key" {
				org, key = e.newPolicyOrg("", true)
				kid, ksec := e.newKey(org, computerCaps)
				e.patchKey(kid, `{"policy":`+policy+`}`, http.StatusOK)
				key = ksec
			}
			c := e.createNet(key, asks)
			if c.Limits.NetworkPolicy != nil {
				t.Fatalf("%s\n%s\n%s (%s): the computer got %+v", seedMaskedKeyNoInternet, seedAllowedHostsOrg, setting, level, c.Limits.NetworkPolicy)
			}
			if out := e.sh(key, c.ID, "cat /proc/net/dev"); strings.Contains(out, "eth0") || !strings.Contains(out, "lo:") {
				t.Fatalf("%s (%s): interfaces of a computer without a network:\n%s", setting, level, out)
			}
			evs := eventsOf(e.audit(key, "?type="+computer.AuditInternetWithheld), c.ID, "")
			if len(evs) != 1 || evs[0].Data["setting"] != setting || evs[0].Data["policy"] != level {
				t.Fatalf("%s (%s): audit %+v", setting, level, evs)
			}
			if len(e.deniedEvents(key)) != 0 {
				t.Fatalf("%s (%s): a computer given without internet is no refusal", setting, level)
			}
			if n := len(e.computersIn(org)); n != 1 {
				t.Fatalf("%s (%s): %d computers", setting, level, n)
			}
		}
	}
	// Without the switch the switch's 403 comes first (as before).
	_, key := e.newPolicyOrg(`{"settings":{"redact_pii":true}}`, false)
	r := e.do(key, "POST", "/v1/computers", asks)
	if e := r.wantError(t, http.StatusForbidden, "forbidden"); !strings.Contains(e.Error.Message, "computer_internet") {
		t.Fatalf("without the switch: %s", r)
	}
}

// TestDeniedByPolicyOnlyInternet: on a deployment with only internet
// computers, a policy that withholds them refuses every computer call
// (Denied by policy., audited with only_internet, nothing created); an
// organisation without the switch gets no computer (403 forbidden); an
// unrestricted one gets an internet computer with the widest policy its
// key may have. The fake driver records what would have been created.
func TestDeniedByPolicyOnlyInternet(t *testing.T) {
	drv := &sandboxtest.Driver{}
	e := newEnvOn(t, t.TempDir(), drv, func(c *computer.Config) {
		c.Internet = computer.Internet{Enabled: true, Only: true, Domains: []string{"*.example.org", "pypi.org"}}
	})
	org, key := e.newPolicyOrg(`{"settings":{"hosts_allow":["pypi.org"]}}`, true)
	e.do(key, "POST", "/v1/computers", map[string]any{}).wantDenied(t)
	e.do(key, "POST", "/v1/computers", map[string]any{"network_policy": map[string]any{"type": "allowlist", "allowed_domains": []string{"pypi.org"}}}).wantDenied(t)
	if len(drv.Sandboxes()) != 0 || len(e.computersIn(org)) != 0 {
		t.Fatalf("a refused create made a computer: %d sandboxes", len(drv.Sandboxes()))
	}
	evs := e.deniedEvents(key)
	if len(evs) != 2 || evs[1].Data["only_internet"] != true || evs[1].Data["setting"] != "hosts_allow" {
		t.Fatalf("%s\naudit: %+v", seedAllowedHostsOrg, evs)
	}
	org, key = e.newPolicyOrg(`{"settings":{"regions_allow":["eu-west"],"region_exceptions":["builtin:computer"]}}`, true)
	e.do(key, "POST", "/v1/computers", map[string]any{}).wantDenied(t)
	if evs := e.deniedEvents(key); len(drv.Sandboxes()) != 0 || len(evs) != 1 || evs[0].Data["setting"] != "regions_allow" {
		t.Fatalf("%s\n%d sandboxes, audit %+v", seedExceptionNoInternet, len(drv.Sandboxes()), evs)
	}

	_, key = e.newPolicyOrg("", false)
	if r := e.do(key, "POST", "/v1/computers", map[string]any{}); !strings.Contains(r.wantError(t, http.StatusForbidden, "forbidden").Error.Message, "only_internet") {
		t.Fatalf("without the switch: %s", r)
	}

	org, key = e.newPolicyOrg("", true)
	e.do(key, "POST", "/v1/computers", map[string]any{"network_policy": map[string]any{"type": "disabled"}}).wantError(t, http.StatusBadRequest, "invalid_request")
	c := e.createNet(key, map[string]any{})
	spec := drv.Last().SpecValue
	if spec.Network != sandbox.NetworkInternet || strings.Join(spec.Internet.Domains, ",") != "*.example.org,pypi.org" ||
		c.Limits.NetworkPolicy == nil || c.Limits.NetworkPolicy.Type != "allowlist" {
		t.Fatalf("an unrestricted computer: %+v %+v", spec.Network, c.Limits.NetworkPolicy)
	}
	kid, ksec := e.newKey(org, `{"tooling":{"system_tools":["computer"]},"computer":{"internet":{"allowed_domains":["api.example.org","example.com"]}}}`)
	_ = kid
	e.create(ksec, nil)
	if got := strings.Join(drv.Last().SpecValue.Internet.Domains, ","); got != "api.example.org" {
		t.Fatalf("the key's ceiling within the deployment's: %q", got)
	}
	// The organisation's policy turns restrictive: its running computer's
	// calls are refused too.
	e.patchOrg(org, `{"policy":{"settings":{"redact_pii":true}}}`)
	e.do(key, "GET", "/v1/computers/"+c.ID, nil).wantDenied(t)
	e.do(key, "POST", "/v1/computers/"+c.ID+"/exec", map[string]any{"command": "true"}).wantDenied(t)
}

// TestPolicyAdmin: policy.settings are set on organisations and keys
// through the admin API, shown in GET, replaced by PATCH, and validated
// strictly (400 naming the field).
func TestPolicyAdmin(t *testing.T) {
	e := newEnvOn(t, t.TempDir(), &sandboxtest.Driver{}, nil)
	org, _ := e.newPolicyOrg(`{"settings":{"regions_allow":["eu-west"],"region_exceptions":["builtin:computer"],"providers_allow":["openai"],"hosts_allow":["*.example.com"],"redact_pii":true}}`, false)
	var orgs struct {
		Data []struct {
			ID     string          `json:"id"`
			Policy json.RawMessage `json:"policy"`
		} `json:"data"`
	}
	e.do(e.admin, "GET", "/v1/admin/orgs", nil).json(t, &orgs)
	want := `{"settings":{"regions_allow":["eu-west"],"region_exceptions":["builtin:computer"],"providers_allow":["openai"],"hosts_allow":["*.example.com"],"redact_pii":true}}`
	if len(orgs.Data) != 2 || string(orgs.Data[0].Policy) != `{"settings":{}}` || orgs.Data[1].ID != org || string(orgs.Data[1].Policy) != want {
		t.Fatalf("orgs: %+v", orgs.Data)
	}
	e.patchOrg(org, `{"computer_internet":true}`) // the switch leaves the policy alone
	e.patchOrg(org, `{"policy":{"settings":{"redact_pii":true}}}`)
	e.do(e.admin, "GET", "/v1/admin/orgs", nil).json(t, &orgs)
	if string(orgs.Data[1].Policy) != `{"settings":{"redact_pii":true}}` {
		t.Fatalf("after PATCH: %s", orgs.Data[1].Policy)
	}
	r := e.do(e.admin, "POST", "/v1/admin/keys", map[string]any{"org_id": org, "name": "k", "capabilities": json.RawMessage(computerCaps),
		"policy": json.RawMessage(`{"settings":{"hosts_allow":["a.example"]}}`)})
	var created struct {
		Key struct {
			ID     string          `json:"id"`
			Policy json.RawMessage `json:"policy"`
		} `json:"key"`
	}
	r.json(t, &created)
	if r.code != http.StatusCreated || string(created.Key.Policy) != `{"settings":{"hosts_allow":["a.example"]}}` {
		t.Fatalf("key with a policy: %s", r)
	}
	r = e.patchKey(created.Key.ID, `{"policy":{}}`, http.StatusOK)
	if !strings.Contains(string(r.body), `"policy":{"settings":{}}`) {
		t.Fatalf("cleared: %s", r)
	}
	bad := []struct{ method, path, body, param string }{
		{"POST", "/v1/admin/orgs", `{"name":"x","policy":{"settings":{"regions_alow":["a"]}}}`, "policy.settings.regions_alow"},
		{"POST", "/v1/admin/orgs", `{"name":"x","policy":{"settings":{"regions_allow":[]}}}`, "policy.settings.regions_allow"},
		{"PATCH", "/v1/admin/orgs/" + org, `{"policy":{"settings":{"redact_pii":"yes"}}}`, "policy.settings.redact_pii"},
		{"PATCH", "/v1/admin/orgs/" + org, `{"policy":{"rules":{}}}`, "policy.rules"},
		{"PATCH", "/v1/admin/orgs/" + org, `{"policy":{"settings":{"hosts_allow":["a","a"]}}}`, "policy.settings.hosts_allow[1]"},
		{"PATCH", "/v1/admin/orgs/" + org, `{"policy":{"settings":{"hosts_allow":["a"],"hosts_allow":["b"]}}}`, "policy.settings.hosts_allow"},
		{"POST", "/v1/admin/keys", `{"name":"k","policy":{"settings":{"providers_allow":"openai"}}}`, "policy.settings.providers_allow"},
		{"PATCH", "/v1/admin/keys/" + created.Key.ID, `{"policy":{"settings":{"Redact_PII":true}}}`, "policy.settings.Redact_PII"},
		{"PATCH", "/v1/admin/keys/" + created.Key.ID, `{}`, "policy"},
		{"PATCH", "/v1/admin/keys/" + created.Key.ID, `{"policy":{"settings":{}},"name":"x"}`, "name"},
	}
	for _, b := range bad {
		r := e.do(e.admin, b.method, b.path, b.body)
		er := r.wantError(t, http.StatusBadRequest, "invalid_request")
		if er.Error.Param == nil || *er.Error.Param != b.param {
			t.Errorf("%s %s %s: param %v, want %s: %s", b.method, b.path, b.body, er.Error.Param, b.param, r)
		}
	}
	e.patchKey("key_nosuch", `{"policy":{}}`, http.StatusNotFound)
	if _, key := e.newKey("", computerCaps); e.do(key, "PATCH", "/v1/admin/keys/"+created.Key.ID, `{"policy":{}}`).code != http.StatusForbidden {
		t.Fatal("a key that is not the admin's changed a policy")
	}
}

// TestDeniedByPolicyGateway: the Responses gateway's code_interpreter and
// computer tools of a principal whose policy refuses computers run
// nothing: the model is told exactly "Denied by policy." and carries on,
// the response completes, no computer is created, and each refused call
// is audited.
func TestDeniedByPolicyGateway(t *testing.T) {
	e := newEnv(t, func(c *computer.Config) { c.Region = "eu-west" })
	var told []string
	up := newScripted(t, func(n int, req map[string]any) (int, any) {
		if msg := lastToolMessage(req); msg != "" {
			told = append(told, msg)
		}
		switch len(told) {
		case 0:
			return 200, toolCallAnswer("code_interpreter", `{"code":"print(6*7)"}`)
		case 1:
			return 200, toolCallAnswer("builtin__computer_exec", `{"command":"echo hi"}`)
		}
		return 200, chatAnswer(map[string]any{"role": "assistant", "content": "no computer"})
	})
	e.withGateway(up)
	org, key := e.newPolicyOrg(`{"settings":{"regions_allow":["us-east"]}}`, false)
	tools := []any{ciTool[0], map[string]any{"type": "tool", "name": "builtin__computer_exec"}}
	r := e.do(key, "POST", "/v1/responses", map[string]any{"model": "m", "input": "6*7?", "tools": tools})
	if r.code != http.StatusOK {
		t.Fatalf("response: %s", r)
	}
	var out responseObj
	r.json(t, &out)
	if out.Status != "completed" || len(out.Output) != 3 || out.Output[0].Type != "code_interpreter_call" ||
		out.Output[0].Status != "failed" || out.Output[0].ContainerID != "" || out.Output[1].Output != deniedSentence {
		t.Fatalf("response: %s", r)
	}
	if len(told) != 2 || told[0] != deniedSentence || told[1] != deniedSentence {
		t.Fatalf("the model was told %q", told)
	}
	if cs := e.computersIn(org); len(cs) != 0 {
		t.Fatalf("computers: %+v", cs)
	}
	if evs := e.deniedEvents(key); len(evs) != 2 {
		t.Fatalf("audit: %+v", evs)
	}
}

// TestDeniedByPolicyJupyter: a Kernel Gateway kernel start is a computer
// call: refused with 403 and the sentence, nothing created.
func TestDeniedByPolicyJupyter(t *testing.T) {
	drv := &sandboxtest.Driver{}
	e := newEnvOn(t, t.TempDir(), drv, func(c *computer.Config) { c.Region = "eu-west" })
	kgw := jupyter.New(jupyter.Config{}, e.mgr, e.gov)
	t.Cleanup(func() { kgw.Close(context.Background()) })
	e.rewire(func(o *httpapi.Options) { o.Mounts = append(o.Mounts, kgw) })
	_, key := e.newPolicyOrg(`{"settings":{"regions_allow":["us-east"]}}`, false)
	r := e.do(key, "POST", "/api/kernels", map[string]any{"name": "python3"})
	var body struct {
		Message string `json:"message"`
	}
	r.json(t, &body)
	if r.code != http.StatusForbidden || body.Message != deniedSentence {
		t.Fatalf("kernel start: %s", r)
	}
	if len(drv.Sandboxes()) != 0 || len(e.deniedEvents(key)) != 1 {
		t.Fatalf("%d sandboxes, audit %+v", len(drv.Sandboxes()), e.deniedEvents(key))
	}
}
