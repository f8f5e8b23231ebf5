package governance_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/errdefs/errhttp"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/store/sqlite"
)

// TestParsePolicy accepts the five settings (lists lower-cased) and
// refuses, naming the field, anything else: unknown or miscased names,
// wrong types, empty lists, blank, spaced or repeated entries.
func TestParsePolicy(t *testing.T) {
	p, err := governance.ParsePolicy([]byte(`{"settings":{"regions_allow":["EU-West"],"region_exceptions":["builtin:computer"],"providers_allow":["openai"],"hosts_allow":["*.example.com"],"redact_pii":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	s := p.Settings
	if s.RegionsAllow[0] != "eu-west" || s.RegionExceptions[0] != governance.ComputerRegionException ||
		s.ProvidersAllow[0] != "openai" || s.HostsAllow[0] != "*.example.com" || !s.RedactPII || p.Empty() {
		t.Fatalf("%+v", s)
	}
	if got := string(p.JSON()); got != `{"settings":{"regions_allow":["eu-west"],"region_exceptions":["builtin:computer"],"providers_allow":["openai"],"hosts_allow":["*.example.com"],"redact_pii":true}}` {
		t.Fatalf("stored as %s", got)
	}
	for _, doc := range []string{"", "null", "{}", `{"settings":{}}`, `{"settings":null}`, `{"settings":{"redact_pii":false}}`} {
		p, err := governance.ParsePolicy([]byte(doc))
		if err != nil || !p.Empty() || string(p.JSON()) != `{"settings":{}}` {
			t.Errorf("%q: %+v %v", doc, p, err)
		}
	}
	bad := map[string]string{
		`[]`:                                        "policy",
		`{"setting":{}}`:                            "policy.setting",
		`{"settings":[]}`:                           "policy.settings",
		`{"settings":{"regions_alow":["a"]}}`:       "policy.settings.regions_alow",
		`{"settings":{"Regions_Allow":["a"]}}`:      "policy.settings.Regions_Allow",
		`{"settings":{"regions_allow":"eu"}}`:       "policy.settings.regions_allow",
		`{"settings":{"regions_allow":[]}}`:         "policy.settings.regions_allow",
		`{"settings":{"regions_allow":[1]}}`:        "policy.settings.regions_allow",
		`{"settings":{"hosts_allow":["a b"]}}`:      "policy.settings.hosts_allow[0]",
		`{"settings":{"providers_allow":["a",""]}}`: "policy.settings.providers_allow[1]",
		`{"settings":{"regions_allow":["a","A"]}}`:  "policy.settings.regions_allow[1]",
		`{"settings":{"redact_pii":"yes"}}`:         "policy.settings.redact_pii",
		`{"settings":{"redact_pii":null}}`:          "policy.settings.redact_pii",
	}
	for doc, field := range bad {
		_, err := governance.ParsePolicy([]byte(doc))
		param := errhttp.ParamOf(err)
		if !errors.Is(err, governance.ErrInvalid) || param == nil || *param != field || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v (param %v), want ErrInvalid naming %s", doc, err, param, field)
		}
	}
}

func policy(t *testing.T, doc string) governance.Policy {
	t.Helper()
	p, err := governance.ParsePolicy([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestComputerRegion: a level that names regions_allow must list the
// deployment's region or name builtin:computer; an unset region is in no
// list; the organisation's exception does not cover the key's list.
func TestComputerRegion(t *testing.T) {
	eu := policy(t, `{"settings":{"regions_allow":["eu-west","eu-central"]}}`)
	euExc := policy(t, `{"settings":{"regions_allow":["eu-west"],"region_exceptions":["builtin:computer"]}}`)
	otherExc := policy(t, `{"settings":{"regions_allow":["eu-west"],"region_exceptions":["builtin:web_search"]}}`)
	cases := []struct {
		name     string
		org, key governance.Policy
		region   string
		level    string // "": allowed
	}{
		{"no policy", governance.Policy{}, governance.Policy{}, "us-east", ""},
		{"no policy, no region", governance.Policy{}, governance.Policy{}, "", ""},
		{"org lists it", eu, governance.Policy{}, "eu-central", ""},
		{"org lists it, any case", eu, governance.Policy{}, "EU-Central", ""},
		{"org does not list it", eu, governance.Policy{}, "us-east", "organisation"},
		{"region not set", eu, governance.Policy{}, "", "organisation"},
		{"key does not list it", governance.Policy{}, eu, "us-east", "key"},
		{"org exception", euExc, governance.Policy{}, "us-east", ""},
		{"another exception", otherExc, governance.Policy{}, "us-east", "organisation"},
		{"org exception, key restricts", euExc, eu, "us-east", "key"},
		{"key exception, org restricts", eu, euExc, "us-east", "organisation"},
		{"hosts and pii do not restrict the region", policy(t, `{"settings":{"hosts_allow":["a.example"],"redact_pii":true}}`), governance.Policy{}, "us-east", ""},
	}
	for _, c := range cases {
		p := governance.Principal{OrgPolicy: c.org, KeyPolicy: c.key}
		r := p.ComputerRegion(c.region)
		switch {
		case c.level == "" && r != nil:
			t.Errorf("%s: refused: %+v", c.name, r)
		case c.level != "" && (r == nil || r.Level != c.level || r.Setting != "regions_allow"):
			t.Errorf("%s: %+v, want a refusal by the %s", c.name, r, c.level)
		}
	}
}

// TestComputerInternet: regions (even with the exception), providers,
// hosts and redaction each withhold internet computers, at either level.
func TestComputerInternet(t *testing.T) {
	cases := map[string]string{
		`{"settings":{"regions_allow":["eu-west"],"region_exceptions":["builtin:computer"]}}`: "regions_allow",
		`{"settings":{"providers_allow":["openai"]}}`:                                         "providers_allow",
		`{"settings":{"hosts_allow":["api.example.com"]}}`:                                    "hosts_allow",
		`{"settings":{"redact_pii":true}}`:                                                    "redact_pii",
		`{"settings":{"region_exceptions":["builtin:computer"]}}`:                             "",
		`{"settings":{"redact_pii":false}}`:                                                   "",
	}
	for doc, setting := range cases {
		for _, level := range []string{"organisation", "key"} {
			p := governance.Principal{}
			if level == "key" {
				p.KeyPolicy = policy(t, doc)
			} else {
				p.OrgPolicy = policy(t, doc)
			}
			r := p.ComputerInternet()
			switch {
			case setting == "" && r != nil:
				t.Errorf("%s (%s): refused %+v", doc, level, r)
			case setting != "" && (r == nil || r.Setting != setting || r.Level != level || !strings.Contains(r.Reason, setting)):
				t.Errorf("%s (%s): %+v, want a refusal by %s", doc, level, r, setting)
			}
		}
	}
}

// TestPolicyStored: policies are stored, shown, reach the principal (the
// cache does not hide a change), and a restricting policy takes a
// running computer's internet away (InternetAllowed).
func TestPolicyStored(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	g := governance.New(st)
	org, err := g.CreateOrg(ctx, "p", governance.OrgSettings{ComputerInternet: new(true)})
	if err != nil || string(org.Policy) != `{"settings":{}}` {
		t.Fatalf("%s %v", org.Policy, err)
	}
	caps, _ := governance.ParseCapabilities([]byte(`{"tooling":{"system_tools":["computer"]},"computer":{}}`))
	k, secret, err := g.CreateKeyWithPolicy(ctx, org.ID, "k", caps, policy(t, `{"settings":{"providers_allow":["openai"]}}`))
	if err != nil || string(k.Policy) != `{"settings":{"providers_allow":["openai"]}}` {
		t.Fatalf("%s %v", k.Policy, err)
	}
	if why, _ := g.InternetAllowed(ctx, org.ID, k.ID); !strings.Contains(why, "providers_allow") {
		t.Errorf("the key's policy: %q", why)
	}
	p, err := g.Authenticate(ctx, secret)
	if err != nil || len(p.KeyPolicy.Settings.ProvidersAllow) != 1 || !p.OrgPolicy.Empty() {
		t.Fatalf("%+v %v", p, err)
	}
	if _, err := g.SetKeyPolicy(ctx, k.ID, governance.Policy{}); err != nil {
		t.Fatal(err)
	}
	if why, _ := g.InternetAllowed(ctx, org.ID, k.ID); why != "" {
		t.Errorf("cleared: %q", why)
	}
	hosts := policy(t, `{"settings":{"hosts_allow":["api.example.com"]}}`)
	if _, err := g.UpdateOrg(ctx, org.ID, governance.OrgSettings{Policy: &hosts}); err != nil {
		t.Fatal(err)
	}
	if why, _ := g.InternetAllowed(ctx, org.ID, k.ID); !strings.Contains(why, "hosts_allow") {
		t.Errorf("the organisation's policy: %q", why)
	}
	p, err = g.Authenticate(ctx, secret)
	if err != nil || len(p.OrgPolicy.Settings.HostsAllow) != 1 || !p.KeyPolicy.Empty() {
		t.Fatalf("after the changes (the cache must not hide them): %+v %v", p, err)
	}
	// The switch alone does not change the policy.
	o, err := g.UpdateOrg(ctx, org.ID, governance.OrgSettings{ComputerInternet: new(false)})
	if err != nil || string(o.Policy) != string(hosts.JSON()) {
		t.Fatalf("%s %v", o.Policy, err)
	}
	if _, err := g.SetKeyPolicy(ctx, "key_nosuch", governance.Policy{}); err == nil {
		t.Error("a missing key's policy was set")
	}
}
