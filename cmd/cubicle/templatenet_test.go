package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/egress/egresstest"
	"github.com/cubicle-sandbox/cubicle/internal/template"
	"github.com/cubicle-sandbox/cubicle/internal/template/templatetest"
)

// TestServeTemplateNetworkPolicy: a spec's network_policy gives its run
// steps the deployment's egress (the test internet, nothing leaves the
// machine): a step reaches an allowed host and its download is in the
// template; a step that tries another host fails the build; the policy is
// checked like a computer's; the CLI, which has no egress, refuses such a
// spec before building anything.
func TestServeTemplateNetworkPolicy(t *testing.T) {
	in := egresstest.New(t)
	in.Check(t)
	data := t.TempDir()
	st, err := template.Open(filepath.Join(data, "templates"), template.Limits{MaxBytes: 1 << 30, MaxFiles: 100000})
	if err != nil {
		t.Fatal(err)
	}
	templatetest.Import(t, st, "net", templatetest.MiniRoot(t, t.TempDir(), append(slices.Clone(templatetest.Programs), "/usr/bin/curl", "/usr/bin/cat")...), "PATH=/usr/bin:/bin")
	spec := func(run, domains string) string {
		return `{"base": "net", "run": [` + run + `], "network_policy": {"type": "allowlist", "allowed_domains": [` + domains + `]}}`
	}
	const fetch = `"curl -sS --noproxy '*' --max-time 10 -o /fetched.txt http://allowed.test/ && cat /fetched.txt"`

	// The CLI has no egress: refused before the build.
	specFile := filepath.Join(t.TempDir(), "net.json")
	if err := os.WriteFile(specFile, []byte(spec(fetch, `"allowed.test"`)), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := cli(t, "template", "build", specFile, "--name", "fetched", "--data", data); r.code != 1 || !strings.Contains(r.stderr, "build this spec over the API (POST /v1/templates) on a deployment with network.internet") {
		t.Fatalf("CLI build with a network_policy: %+v", r)
	}

	s := startServer(t, data, serveEnv("CUBICLE_ADMIN_KEY="+serveAdminKey,
		"CUBICLE_NETWORK_INTERNET=true", "CUBICLE_NETWORK_ALLOWED_DOMAINS=*.test",
		"CUBICLE_NETWORK_DIAL_NETNS="+in.Netns, "CUBICLE_NETWORK_RESOLVER="+egresstest.DNS.String()+":53"))
	body := func(name, sp string) string {
		b, _ := json.Marshal(map[string]any{"name": name, "spec": json.RawMessage(sp)})
		return string(b)
	}
	// The organisation's switch is off: refused as a computer's would be.
	if r := s.do("POST", "/v1/templates", body("fetched", spec(fetch, `"allowed.test"`))); r.code != 403 || !strings.Contains(string(r.body), "has not turned on computer_internet") {
		t.Fatalf("before the organisation's switch: %d %s", r.code, r.body)
	}
	s.decode("PATCH", "/v1/admin/orgs/"+s.firstOrg(t), `{"computer_internet":true}`, 200, nil)
	for sp, want := range map[string]string{
		spec(fetch, `"example.com"`): `"example.com\" is not allowed on this deployment`,
		spec(fetch, ``):              `an allowlist needs at least one domain`,
		`{"base": "net", "network_policy": {"type": "allowlist", "allowed_domains": ["allowed.test"]}}`:       `network_policy is the run steps' network: give run steps`,
		`{"base": "net", "run": ["true"], "network_policy": {"type": "open", "allowed_domains": ["a.test"]}}`: `network_policy.type must be \"allowlist\"`,
	} {
		if r := s.do("POST", "/v1/templates", body("bad", sp)); r.code != 400 && r.code != 403 || !strings.Contains(string(r.body), want) {
			t.Errorf("%s: %d %s (want %q)", sp, r.code, r.body, want)
		}
	}
	var got struct {
		Name string `json:"name"`
	}
	// Its computers get the template's default network policy (the
	// organisation allows internet now).
	withDefaults := strings.TrimSuffix(spec(fetch, `"allowed.test"`), "}") + `, "defaults": {"network_policy": {"type": "allowlist", "allowed_domains": ["allowed.test"]}}}`
	s.decode("POST", "/v1/templates", body("fetched", withDefaults), 201, &got)
	tp, err := st.Get(t.Context(), "fetched")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(st.RootDir(tp), "fetched.txt")); err != nil || !strings.Contains(string(b), "hello allowed.test from 198.51.100.10") {
		t.Fatalf("the step's download in the template: %q, %v", b, err)
	}
	var c struct {
		ID     string `json:"id"`
		Limits struct {
			NetworkPolicy *struct {
				AllowedDomains []string `json:"allowed_domains"`
			} `json:"network_policy"`
		} `json:"limits"`
	}
	s.decode("POST", "/v1/computers", `{"template": "fetched"}`, 201, &c)
	if np := c.Limits.NetworkPolicy; np == nil || len(np.AllowedDomains) != 1 || np.AllowedDomains[0] != "allowed.test" {
		t.Fatalf("a computer of the template: %+v", c)
	}
	if out := s.exec(t, c.ID, "cat /fetched.txt; curl -sS --noproxy '*' --max-time 10 http://allowed.test/"); strings.Count(out, "hello allowed.test from 198.51.100.10") != 2 {
		t.Errorf("the template's file and its network policy: %s", out)
	}
	// A request's own policy replaces the template's (decoded afresh: a
	// field the answer leaves out must not keep the last computer's).
	c.Limits.NetworkPolicy = nil
	s.decode("POST", "/v1/computers", `{"template": "fetched", "network_policy": {"type": "disabled"}}`, 201, &c)
	if np := c.Limits.NetworkPolicy; np != nil && len(np.AllowedDomains) > 0 {
		t.Fatalf("a computer that asks for no network: %+v", *np)
	}
	// A host the policy does not allow: the step fails, so does the build.
	r := s.do("POST", "/v1/templates", body("other", spec(`"curl -sS --noproxy '*' --max-time 10 http://other.test/"`, `"allowed.test"`)))
	if r.code != 400 || !strings.Contains(string(r.body), "failed with exit status 6") || !strings.Contains(string(r.body), "Could not resolve host: other.test") {
		t.Fatalf("a step reaching a host its policy does not allow: %d %s", r.code, r.body)
	}
}
