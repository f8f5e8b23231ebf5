package computer

import (
	"context"
	"fmt"
	"net/netip"
	"net/textproto"
	"slices"
	"strings"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/log"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// Internet is what the deployment lets computers reach (the [network]
// section): nothing unless Enabled; a computer's own policy must stay
// within Domains and CIDRs.
type Internet struct {
	Enabled bool
	// Only makes every computer an internet computer (network.only_internet):
	// a request without a network_policy gets the widest allowlist its key
	// may have, "disabled" is refused, and an organisation or key whose
	// policy withholds internet computers gets no computer at all.
	Only bool
	// Domains are "example.com", "*.example.com" or "*" (any name).
	Domains []string
	CIDRs   []netip.Prefix
	// Recheck is how often a running internet computer's key and
	// organisation are checked again (revoked, computer_internet off: the
	// computer loses its internet); default 30 s.
	Recheck time.Duration
}

// DefaultRecheck is Internet.Recheck's default.
const DefaultRecheck = 30 * time.Second

// Network policy types of POST /v1/computers (OpenAI's container shape).
const (
	PolicyDisabled  = "disabled"
	PolicyAllowlist = "allowlist"
)

// NetworkPolicy is a computer's network policy: "disabled" (only
// loopback, the default) or "allowlist" of domains and, as Cubicle's
// addition, CIDRs reachable as IP literals. Its JSON tags are the store's
// record of it (storedLimits), not an API shape.
type NetworkPolicy struct {
	Type           string   `json:"type"`
	AllowedDomains []string `json:"allowed_domains,omitempty"`
	AllowedCIDRs   []string `json:"allowed_cidrs,omitempty"`
	// DomainSecrets are headers Cubicle adds to HTTPS requests to their
	// domain (OpenAI's domain_secrets): in a request with their values,
	// in the store and every view without (names only).
	DomainSecrets []DomainSecret `json:"domain_secrets,omitempty"`
	// fromTemplate marks a template's default (template.ComputerDefaults), which
	// is left out, not refused, where internet is not allowed.
	fromTemplate bool
}

// DomainSecret is one of a network policy's domain_secrets (OpenAI's
// shape): Name is the HTTP header Cubicle sets on requests to Domain,
// Value its value, which no answer, record or log ever shows.
type DomainSecret struct {
	Domain string `json:"domain"`
	Name   string `json:"name"`
	Value  string `json:"value,omitempty"`
}

// internet turns a request's network policy into the computer's network
// mode and policy, refusing what the deployment does not allow.
func (m *Manager) internet(who governance.Principal, p *NetworkPolicy) (sandbox.NetworkMode, sandbox.InternetPolicy, error) {
	if m.cfg.Internet.Only {
		if p != nil && p.Type == PolicyDisabled {
			return "", sandbox.InternetPolicy{}, fmt.Errorf("%w: network_policy: this deployment runs only computers that reach the internet (network.only_internet); leave network_policy out or give an allowlist", ErrInvalid)
		}
		if p == nil {
			p = m.widest(who)
		}
	}
	if p == nil || p.Type == PolicyDisabled {
		if p != nil && (len(p.AllowedDomains) > 0 || len(p.AllowedCIDRs) > 0 || len(p.DomainSecrets) > 0) {
			return "", sandbox.InternetPolicy{}, fmt.Errorf("%w: network_policy: a disabled policy allows nothing; use type allowlist", ErrInvalid)
		}
		return sandbox.NetworkNone, sandbox.InternetPolicy{}, nil
	}
	if p.Type != PolicyAllowlist {
		return "", sandbox.InternetPolicy{}, fmt.Errorf("%w: network_policy.type must be %q or %q, got %q", ErrInvalid, PolicyDisabled, PolicyAllowlist, p.Type)
	}
	if !m.cfg.Internet.Enabled {
		return "", sandbox.InternetPolicy{}, fmt.Errorf("%w: this deployment gives computers no internet (network.internet = false)", ErrNoInternet)
	}
	if !who.Org.ComputerInternet {
		return "", sandbox.InternetPolicy{}, fmt.Errorf("%w: the organisation has not turned on computer_internet (an admin can: PATCH /v1/admin/orgs/%s with {\"computer_internet\": true})", ErrNoInternet, who.Org.ID)
	}
	if len(p.AllowedDomains) == 0 && len(p.AllowedCIDRs) == 0 {
		return "", sandbox.InternetPolicy{}, fmt.Errorf("%w: network_policy.allowed_domains: an allowlist needs at least one domain (or allowed_cidrs)", ErrInvalid)
	}
	if len(p.AllowedDomains)+len(p.AllowedCIDRs) > 256 {
		return "", sandbox.InternetPolicy{}, fmt.Errorf("%w: network_policy: at most 256 entries", ErrInvalid)
	}
	keyDomains, keyCIDRs := keyCeiling(who)
	pol := sandbox.InternetPolicy{}
	for _, d := range p.AllowedDomains {
		d = strings.ToLower(strings.TrimSuffix(d, "."))
		if !within(d, m.cfg.Internet.Domains) {
			return "", sandbox.InternetPolicy{}, fmt.Errorf("%w: network_policy.allowed_domains: %q is not allowed on this deployment", ErrInvalid, d)
		}
		if keyDomains != nil && !within(d, *keyDomains) {
			return "", sandbox.InternetPolicy{}, fmt.Errorf("%w: network_policy.allowed_domains: %q is not allowed for this key", ErrNoInternet, d)
		}
		pol.Domains = append(pol.Domains, d)
	}
	for _, s := range p.AllowedCIDRs {
		c, err := netip.ParsePrefix(s)
		if err != nil {
			return "", sandbox.InternetPolicy{}, fmt.Errorf("%w: network_policy.allowed_cidrs: %q is not a CIDR", ErrInvalid, s)
		}
		if !covered(c.Masked(), m.cfg.Internet.CIDRs) {
			return "", sandbox.InternetPolicy{}, fmt.Errorf("%w: network_policy.allowed_cidrs: %s is not allowed on this deployment", ErrInvalid, c)
		}
		if keyCIDRs != nil && !covered(c.Masked(), *keyCIDRs) {
			return "", sandbox.InternetPolicy{}, fmt.Errorf("%w: network_policy.allowed_cidrs: %s is not allowed for this key", ErrNoInternet, c)
		}
		pol.CIDRs = append(pol.CIDRs, c.Masked())
	}
	if err := pol.Validate(); err != nil {
		return "", sandbox.InternetPolicy{}, fmt.Errorf("%w: network_policy.allowed_domains: %v", ErrInvalid, strings.TrimPrefix(err.Error(), sandbox.ErrInvalidSpec.Error()+": network: "))
	}
	secrets, err := domainSecrets(p.DomainSecrets, pol.Domains)
	if err != nil {
		return "", sandbox.InternetPolicy{}, err
	}
	pol.Secrets = secrets
	return sandbox.NetworkInternet, pol, nil
}

// domainSecrets checks a policy's domain_secrets (never naming a value):
// each for a domain its allowed_domains allow, a header name that does
// not frame the request, a value without control characters.
func domainSecrets(list []DomainSecret, allowed []string) ([]sandbox.DomainSecret, error) {
	var out []sandbox.DomainSecret
	for _, s := range list {
		d := strings.ToLower(strings.TrimSuffix(s.Domain, "."))
		if !within(d, allowed) {
			return nil, fmt.Errorf("%w: network_policy.domain_secrets: %q is not in allowed_domains (a secret goes only to a domain the policy allows)", ErrInvalid, s.Domain)
		}
		out = append(out, sandbox.DomainSecret{Domain: d, Name: textproto.CanonicalMIMEHeaderKey(s.Name), Value: s.Value})
	}
	if err := sandbox.ValidateSecrets(out); err != nil {
		return nil, fmt.Errorf("%w: network_policy.domain_secrets: %v", ErrInvalid, err)
	}
	return out, nil
}

// withOrgSecrets puts the organisation's secrets for domains the policy
// allows before the computer's own (applied in order: for the same domain
// and header, the computer's wins).
func withOrgSecrets(pol sandbox.InternetPolicy, org []sandbox.DomainSecret) sandbox.InternetPolicy {
	var out []sandbox.DomainSecret
	for _, s := range org {
		if within(s.Domain, pol.Domains) {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return pol
	}
	pol.Secrets = append(out, pol.Secrets...)
	return pol
}

// within reports whether the domain pattern d asks for no more than one of
// the ceiling's patterns allows.
func within(d string, ceiling []string) bool {
	for _, c := range ceiling {
		switch {
		case c == "*", c == d:
			return true
		case strings.HasPrefix(c, "*."):
			suffix := c[1:] // ".example.com"
			if strings.HasSuffix(strings.TrimPrefix(d, "*"), suffix) && strings.TrimPrefix(d, "*") != suffix {
				return true
			}
		}
	}
	return false
}

// covered reports whether c lies inside one of the ceiling's prefixes.
func covered(c netip.Prefix, ceiling []netip.Prefix) bool {
	for _, p := range ceiling {
		if p.Bits() <= c.Bits() && p.Contains(c.Addr()) {
			return true
		}
	}
	return false
}

// widest is the allowlist of a computer created without a network_policy
// on a deployment with only internet computers: the key's ceiling where it
// has one (the entries within the deployment's), else the deployment's.
func (m *Manager) widest(who governance.Principal) *NetworkPolicy {
	np := &NetworkPolicy{Type: PolicyAllowlist, AllowedDomains: m.cfg.Internet.Domains}
	for _, c := range m.cfg.Internet.CIDRs {
		np.AllowedCIDRs = append(np.AllowedCIDRs, c.String())
	}
	keyDomains, keyCIDRs := keyCeiling(who)
	if keyDomains != nil {
		np.AllowedDomains = nil
		for _, d := range *keyDomains {
			if within(strings.ToLower(d), m.cfg.Internet.Domains) {
				np.AllowedDomains = append(np.AllowedDomains, d)
			}
		}
	}
	if keyCIDRs != nil {
		np.AllowedCIDRs = nil
		for _, c := range *keyCIDRs {
			if covered(c, m.cfg.Internet.CIDRs) {
				np.AllowedCIDRs = append(np.AllowedCIDRs, c.String())
			}
		}
	}
	return np
}

// effective is the policy a computer got, as its view shows it (nil for
// loopback only).
func effective(mode sandbox.NetworkMode, pol sandbox.InternetPolicy) *NetworkPolicy {
	if mode != sandbox.NetworkInternet {
		return nil
	}
	out := &NetworkPolicy{Type: PolicyAllowlist, AllowedDomains: pol.Domains}
	for _, c := range pol.CIDRs {
		out.AllowedCIDRs = append(out.AllowedCIDRs, c.String())
	}
	for _, s := range pol.Secrets { // names only (each once), never a value
		if v := (DomainSecret{Domain: s.Domain, Name: s.Name}); !slices.Contains(out.DomainSecrets, v) {
			out.DomainSecrets = append(out.DomainSecrets, v)
		}
	}
	return out
}

// recheckInternet takes the internet away from running computers whose
// key or organisation no longer allows it (revoked key, computer_internet
// turned off, computers no longer allowed): they keep running, with
// loopback only. The reaper calls it every Internet.Recheck.
func (m *Manager) recheckInternet(ctx context.Context) {
	m.mu.Lock()
	var check []*live
	for _, l := range m.live {
		if l.internet && !l.cut && !l.stopping {
			check = append(check, l)
		}
	}
	m.mu.Unlock()
	for _, l := range check {
		why, err := m.gov.InternetAllowed(ctx, l.rec.OrgID, l.rec.KeyID)
		if err != nil || why == "" {
			continue // a store that cannot answer leaves things as they are
		}
		m.cutInternet(ctx, l, why)
	}
}

// cutInternet takes l's internet away (it keeps running with loopback)
// and logs why.
func (m *Manager) cutInternet(ctx context.Context, l *live, why string) error {
	cutter, ok := l.sb.(sandbox.NetworkCutter)
	if !ok {
		return fmt.Errorf("the computer's network cannot be cut")
	}
	if err := cutter.CutNetwork(); err != nil {
		log.From(ctx).WarnContext(ctx, "taking a computer's internet away", "computer", l.rec.ID, "err", err)
		return err
	}
	m.mu.Lock()
	l.cut = true
	m.mu.Unlock()
	log.From(ctx).InfoContext(ctx, "computer lost its internet", "computer", l.rec.ID, "why", why)
	return nil
}

// keyCeiling is the key's narrowing of the network policy (nil: none).
func keyCeiling(p governance.Principal) (*[]string, *[]netip.Prefix) {
	if p.Caps.Computer == nil || p.Caps.Computer.Internet == nil {
		return nil, nil
	}
	ki := p.Caps.Computer.Internet
	domains := append([]string{}, ki.AllowedDomains...)
	cidrs := []netip.Prefix{}
	for _, s := range ki.AllowedCIDRs {
		if c, err := netip.ParsePrefix(s); err == nil { // validated with the capabilities
			cidrs = append(cidrs, c.Masked())
		}
	}
	return &domains, &cidrs
}
