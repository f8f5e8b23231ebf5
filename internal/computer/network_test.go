package computer

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// TestInternetLevels: each level only narrows the one above — the
// deployment's ceiling, the organisation's switch, the key's ceiling —
// and the request's policy must fit them all.
func TestInternetLevels(t *testing.T) {
	m := &Manager{cfg: Config{Internet: Internet{Enabled: true, Domains: []string{"*.example.org", "pypi.org"},
		CIDRs: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}}}}
	caps, err := governance.ParseCapabilities([]byte(`{"tooling":{},"computer":{"internet":{"allowed_domains":["*.docs.example.org"],"allowed_cidrs":["203.0.113.0/28"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	on := store.Org{ID: "org_1", AllowComputer: true, ComputerInternet: true}
	plain := governance.Principal{Org: on}
	narrowed := governance.Principal{Org: on, Caps: caps}
	allow := func(domains, cidrs []string) *NetworkPolicy {
		return &NetworkPolicy{Type: PolicyAllowlist, AllowedDomains: domains, AllowedCIDRs: cidrs}
	}
	cases := []struct {
		name string
		who  governance.Principal
		np   *NetworkPolicy
		want error // nil: allowed
	}{
		{"none asked", plain, nil, nil},
		{"within the deployment", plain, allow([]string{"api.example.org", "*.cdn.example.org", "PyPI.org."}, []string{"203.0.113.8/29"}), nil},
		{"the suffix itself is not below it", plain, allow([]string{"example.org"}, nil), ErrInvalid},
		{"outside the deployment", plain, allow([]string{"example.com"}, nil), ErrInvalid},
		{"a CIDR wider than the deployment's", plain, allow(nil, []string{"203.0.112.0/23"}), ErrInvalid},
		{"switch off", governance.Principal{Org: store.Org{ID: "org_2", AllowComputer: true}}, allow([]string{"pypi.org"}, nil), ErrNoInternet},
		{"within the key", narrowed, allow([]string{"v1.docs.example.org"}, []string{"203.0.113.0/29"}), nil},
		{"the deployment allows it, the key does not", narrowed, allow([]string{"pypi.org"}, nil), ErrNoInternet},
		{"a CIDR outside the key's", narrowed, allow(nil, []string{"203.0.113.64/28"}), ErrNoInternet},
	}
	for _, c := range cases {
		mode, pol, err := m.internet(c.who, c.np)
		switch {
		case c.want == nil && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != nil && !errors.Is(err, c.want):
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		case c.want == nil && c.np != nil && (mode != sandbox.NetworkInternet || len(pol.Domains) != len(c.np.AllowedDomains)):
			t.Errorf("%s: %s %+v", c.name, mode, pol)
		}
	}
	if _, pol, _ := m.internet(plain, allow([]string{"PyPI.org."}, nil)); pol.Domains[0] != "pypi.org" {
		t.Errorf("names are normalised: %v", pol.Domains)
	}
	m.cfg.Internet.Enabled = false
	_, _, err = m.internet(plain, allow([]string{"pypi.org"}, nil))
	if !errors.Is(err, ErrNoInternet) || strings.Contains(err.Error(), "computers are not enabled") {
		t.Errorf("a deployment without internet: %v (it said computers were not enabled)", err)
	}
}
