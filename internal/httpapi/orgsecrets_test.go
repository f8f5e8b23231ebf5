package httpapi_test

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/sandboxtest"
	"github.com/cubicle-sandbox/cubicle/internal/store/sqlite"
)

// clearIn names the files of the data directory (the database, its
// write-ahead log, the key file) that hold v.
func clearIn(t *testing.T, dir, v string) []string {
	t.Helper()
	var found []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if b, err := os.ReadFile(filepath.Join(dir, e.Name())); err == nil && bytes.Contains(b, []byte(v)) {
			found = append(found, e.Name())
		}
	}
	return found
}

// TestOrgSecretsAuditedAndSealed (issue 13): an organisation's domain
// secrets are audited when created, replaced and deleted (domain and
// header, never the value, in the organisation's own trail); no answer,
// audit row or file of the data directory holds a value, neither an
// organisation's nor a computer's own (POST /v1/computers), nor one of a
// refused request; a lost key is a 503 that says what to do (the names can
// still be listed and deleted), never a 500.
func TestOrgSecretsAuditedAndSealed(t *testing.T) {
	dir := t.TempDir()
	drv := &sandboxtest.Driver{}
	e := newEnvOn(t, dir, drv, func(c *computer.Config) {
		c.Internet = computer.Internet{Enabled: true, Domains: []string{"*.example.com"}}
	})
	org, key := e.newPolicyOrg("", true)
	const orgValue, orgValue2, mine = "Bearer org-secret-a71e", "Bearer org-secret-b03c", "Bearer own-secret-9d2f"
	secrets := "/v1/admin/orgs/" + org + "/domain_secrets"
	var answers []string
	for _, body := range []string{
		`{"domain":"api.example.com","name":"authorization","value":"` + orgValue + `"}`,
		`{"domain":"api.example.com","name":"Authorization","value":"` + orgValue2 + `"}`,
		`{"domain":"*.example.com","name":"X-Key","value":"` + orgValue + `"}`,
	} {
		r := e.do(e.admin, "POST", secrets, body)
		if r.code != http.StatusOK {
			t.Fatalf("set: %s", r)
		}
		answers = append(answers, string(r.body))
	}
	for q, param := range map[string]string{"": "domain", "?domain=*.example.com": "name", "?name=x-key": "domain"} {
		er := e.do(e.admin, "DELETE", secrets+q, nil).wantError(t, http.StatusBadRequest, "")
		if er.Error.Param == nil || *er.Error.Param != param {
			t.Errorf("delete%s: param %v, want %s (it was a 404 \"domain secret  for : not found\")", q, er.Error.Param, param)
		}
	}
	if r := e.do(e.admin, "DELETE", secrets+"?domain=*.example.com&name=x-key", nil); r.code != http.StatusNoContent {
		t.Fatalf("delete: %s", r)
	}
	evs := e.audit(key, "")
	var got []string
	for _, ev := range evs {
		if strings.HasPrefix(ev.Type, "org.domain_secret_") {
			got = append(got, ev.Type+" "+ev.Data["domain"].(string)+" "+ev.Data["name"].(string)+" "+ev.Data["via"].(string))
			if ev.OrgID != org || ev.KeyID == "" || len(ev.Data) != 3 {
				t.Errorf("audit row %+v", ev)
			}
		}
	}
	want := []string{
		"org.domain_secret_created api.example.com Authorization api",
		"org.domain_secret_replaced api.example.com Authorization api",
		"org.domain_secret_created *.example.com X-Key api",
		"org.domain_secret_deleted *.example.com X-Key api",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("audit:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// A computer's own secret, and requests refused for their secret.
	c := e.do(key, "POST", "/v1/computers", `{"network_policy":{"type":"allowlist","allowed_domains":["api.example.com"],"domain_secrets":[{"domain":"api.example.com","name":"X-Own","value":"`+mine+`"}]}}`)
	if c.code != http.StatusCreated {
		t.Fatalf("create: %s", c)
	}
	if s := drv.Last().SpecValue.Internet.Secrets; len(s) != 2 || s[0].Value != orgValue2 || s[1].Value != mine {
		t.Fatalf("the computer's network got %v", s)
	}
	answers = append(answers, string(c.body))
	for _, bad := range []string{
		`{"network_policy":{"type":"allowlist","allowed_domains":["api.example.com"],"domain_secrets":[{"domain":"other.example.org","name":"X-Own","value":"` + mine + `"}]}}`,
		`{"network_policy":{"type":"allowlist","allowed_domains":["api.example.com"],"domain_secrets":[{"domain":"api.example.com","name":"Host","value":"` + mine + `"}]}}`,
		`{"network_policy":{"type":"allowlist","allowed_domains":["api.example.com"],"domain_secrets":[{"domain":"api.example.com","name":"X-Own","value":"` + mine + `\u0001"}]}}`,
		`{"network_policy":{"type":"allowlist","allowed_domains":["api.example.com"],"domain_secrets":[{"domain":"api.example.com","name":"X-Own","value":"` + mine + `","extra":1}]}}`,
	} {
		r := e.do(key, "POST", "/v1/computers", bad)
		if r.code != http.StatusBadRequest {
			t.Errorf("%s: %s", bad, r)
		}
		answers = append(answers, string(r.body))
	}
	for _, path := range []string{"/v1/computers", "/v1/audit"} {
		answers = append(answers, string(e.do(key, "GET", path, nil).body))
	}
	answers = append(answers, string(e.do(e.admin, "GET", secrets, nil).body), string(e.do(e.admin, "GET", "/v1/admin/orgs", nil).body))
	for i, a := range answers {
		for _, v := range []string{"org-secret", "own-secret"} {
			if strings.Contains(a, v) {
				t.Errorf("answer %d shows a value: %s", i, a)
			}
		}
	}
	for _, v := range []string{"org-secret", "own-secret"} {
		if f := clearIn(t, dir, v); len(f) > 0 {
			t.Errorf("%s in clear in %v", v, f)
		}
	}

	// The key file is lost: creating an internet computer of the
	// organisation is a 503 saying so; the secrets' names are still listed
	// and deleted; setting one is refused until those are gone.
	if err := os.Remove(filepath.Join(dir, sqlite.SecretsKeyFile)); err != nil {
		t.Fatal(err)
	}
	e2 := newEnvOn(t, dir, drv, func(c *computer.Config) { // a restart on the same data directory
		c.Internet = computer.Internet{Enabled: true, Domains: []string{"*.example.com"}}
	})
	r := e2.do(key, "POST", "/v1/computers", `{"network_policy":{"type":"allowlist","allowed_domains":["api.example.com"]}}`)
	if er := r.wantError(t, http.StatusServiceUnavailable, "secrets_key_unavailable"); !strings.Contains(er.Error.Message, sqlite.SecretsKeyFile+" is missing") {
		t.Errorf("create with the key lost: %s", r)
	}
	if r := e2.do(e2.admin, "GET", secrets, nil); r.code != http.StatusOK || !strings.Contains(string(r.body), `"name":"Authorization"`) {
		t.Errorf("list with the key lost: %s", r)
	}
	r = e2.do(e2.admin, "POST", secrets, `{"domain":"b.example.com","name":"X-B","value":"v"}`)
	if er := r.wantError(t, http.StatusServiceUnavailable, "secrets_key_unavailable"); !strings.Contains(er.Error.Message, "delete those secrets") {
		t.Errorf("set with the key lost: %s", r)
	}
	if r := e2.do(e2.admin, "DELETE", secrets+"?domain=api.example.com&name=Authorization", nil); r.code != http.StatusNoContent {
		t.Fatalf("delete with the key lost: %s", r)
	}
	if r := e2.do(e2.admin, "POST", secrets, `{"domain":"b.example.com","name":"X-B","value":"v"}`); r.code != http.StatusOK {
		t.Errorf("set once nothing needs the lost key: %s", r)
	}
	if r := e2.do(key, "POST", "/v1/computers", `{"network_policy":{"type":"allowlist","allowed_domains":["api.example.com"]}}`); r.code != http.StatusCreated {
		t.Errorf("create after: %s", r)
	}
}
