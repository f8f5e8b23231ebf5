package computer

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// Internet is what the deployment lets computers reach (the [network]
// section): nothing unless Enabled; a computer's own policy must stay
// within Domains and CIDRs.
type Internet struct {
	Enabled bool
	// Domains are "example.com", "*.example.com" or "*" (any name).
	Domains []string
	CIDRs   []netip.Prefix
}

// Network policy types of POST /v1/computers (OpenAI's container shape).
const (
	PolicyDisabled  = "disabled"
	PolicyAllowlist = "allowlist"
)

// NetworkPolicy is a computer's network_policy: "disabled" (only
// loopback, the default) or "allowlist" of domains and, as Cubicle's
// addition, CIDRs reachable as IP literals.
type NetworkPolicy struct {
	Type           string   `json:"type"`
	AllowedDomains []string `json:"allowed_domains,omitempty"`
	AllowedCIDRs   []string `json:"allowed_cidrs,omitempty"`
}

// internet turns a request's network policy into the computer's network
// mode and policy, refusing what the deployment does not allow.
func (m *Manager) internet(p *NetworkPolicy) (sandbox.NetworkMode, sandbox.InternetPolicy, error) {
	if p == nil || p.Type == PolicyDisabled {
		if p != nil && (len(p.AllowedDomains) > 0 || len(p.AllowedCIDRs) > 0) {
			return "", sandbox.InternetPolicy{}, fmt.Errorf("%w: network_policy: a disabled policy allows nothing; use type allowlist", ErrInvalid)
		}
		return sandbox.NetworkNone, sandbox.InternetPolicy{}, nil
	}
	if p.Type != PolicyAllowlist {
		return "", sandbox.InternetPolicy{}, fmt.Errorf("%w: network_policy.type must be %q or %q, got %q", ErrInvalid, PolicyDisabled, PolicyAllowlist, p.Type)
	}
	if !m.cfg.Internet.Enabled {
		return "", sandbox.InternetPolicy{}, fmt.Errorf("%w: this deployment gives computers no internet (network.internet = false)", ErrForbidden)
	}
	if len(p.AllowedDomains) == 0 && len(p.AllowedCIDRs) == 0 {
		return "", sandbox.InternetPolicy{}, fmt.Errorf("%w: network_policy.allowed_domains: an allowlist needs at least one domain (or allowed_cidrs)", ErrInvalid)
	}
	if len(p.AllowedDomains)+len(p.AllowedCIDRs) > 256 {
		return "", sandbox.InternetPolicy{}, fmt.Errorf("%w: network_policy: at most 256 entries", ErrInvalid)
	}
	pol := sandbox.InternetPolicy{}
	for _, d := range p.AllowedDomains {
		d = strings.ToLower(strings.TrimSuffix(d, "."))
		if !within(d, m.cfg.Internet.Domains) {
			return "", sandbox.InternetPolicy{}, fmt.Errorf("%w: network_policy.allowed_domains: %q is not allowed on this deployment", ErrInvalid, d)
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
		pol.CIDRs = append(pol.CIDRs, c.Masked())
	}
	if err := pol.Validate(); err != nil {
		return "", sandbox.InternetPolicy{}, fmt.Errorf("%w: network_policy.allowed_domains: %v", ErrInvalid, strings.TrimPrefix(err.Error(), sandbox.ErrInvalidSpec.Error()+": network: "))
	}
	return sandbox.NetworkInternet, pol, nil
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

// effective is the policy a computer got, as its view shows it (nil for
// loopback only).
func (p *NetworkPolicy) effective(pol sandbox.InternetPolicy) *NetworkPolicy {
	if p == nil || p.Type != PolicyAllowlist {
		return nil
	}
	out := &NetworkPolicy{Type: PolicyAllowlist, AllowedDomains: pol.Domains}
	for _, c := range pol.CIDRs {
		out.AllowedCIDRs = append(out.AllowedCIDRs, c.String())
	}
	return out
}
