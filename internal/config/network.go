package config

import (
	"net/netip"
	"strings"
	"time"
)

// Network configures internet computers (docs/network.md): off unless
// Internet is set; then a computer asks for internet with a network policy
// that must stay within AllowedDomains and AllowedCIDRs.
type Network struct {
	// Internet lets computers have internet at all (default false: every
	// computer has only loopback).
	Internet bool `toml:"internet"`
	// OnlyInternet makes every computer an internet computer (needs
	// Internet): there is no computer without a network on this
	// deployment, so an organisation or key whose policy withholds
	// internet computers gets none ("Denied by policy.").
	OnlyInternet bool `toml:"only_internet"`
	// AllowedDomains is the deployment's ceiling on the names a computer's
	// policy may allow: "example.com", "*.example.com", or "*" for any.
	AllowedDomains []string `toml:"allowed_domains"`
	// AllowedCIDRs are the addresses a computer's policy may allow as IP
	// literals.
	AllowedCIDRs []string `toml:"allowed_cidrs"`
	// DenyCIDRs is the operator's blocklist, refused whatever a policy
	// says (the private-address rule is always on besides).
	DenyCIDRs []string `toml:"deny_cidrs"`
	// DialNetns dials and resolves from this network namespace (a path
	// such as /run/netns/NAME) instead of the host's: tests and benchmarks
	// point Cubicle's upstream side at a test internet.
	DialNetns string `toml:"dial_netns"`
	// Resolver is the DNS server (host:port) of Cubicle's own resolution;
	// empty: the host's resolver.
	Resolver string `toml:"resolver"`
	// UpstreamCA is a PEM file of certificates trusted, besides the host's
	// system roots, for the real servers of domains with secrets (the
	// only connections whose TLS Cubicle terminates); tests use their
	// test CA.
	UpstreamCA string `toml:"upstream_ca"`
	// ConnsPerSecond bounds each organisation's new connections (0: no
	// limit), in bursts of ConnsBurst; BytesPerSecond its bytes each way,
	// summed over its computers (unset: no limit).
	ConnsPerSecond float64 `toml:"conns_per_second"`
	ConnsBurst     int     `toml:"conns_burst"`
	BytesPerSecond Size    `toml:"bytes_per_second"`
	// RecheckSeconds is how often a running internet computer's key and
	// organisation are checked again; 0: the default (30).
	RecheckSeconds int `toml:"recheck_seconds"`
}

// Recheck is recheck_seconds as a duration (0: the computer layer's default).
func (n Network) Recheck() time.Duration { return seconds(n.RecheckSeconds) }

func (n Network) validate() error {
	if n.OnlyInternet && !n.Internet {
		return invalid("network.only_internet", "needs network.internet = true (a deployment with only internet computers must offer internet)")
	}
	for _, d := range n.AllowedDomains {
		name := strings.TrimPrefix(d, "*.")
		if d != "*" && (name == "" || strings.ContainsAny(name, "*/: ")) {
			return invalid("network.allowed_domains", "%q is not a domain, *.domain or *", d)
		}
	}
	for key, list := range map[string][]string{"network.allowed_cidrs": n.AllowedCIDRs, "network.deny_cidrs": n.DenyCIDRs} {
		if _, err := Prefixes(list); err != nil {
			return invalid(key, "%v", err)
		}
	}
	if n.ConnsPerSecond < 0 || n.ConnsBurst < 0 || n.BytesPerSecond < 0 {
		return invalid("network.conns_per_second", "the rate limits (conns_per_second, conns_burst, bytes_per_second) must not be negative")
	}
	if n.RecheckSeconds < 0 || n.RecheckSeconds > 3600 {
		return invalid("network.recheck_seconds", "must be 0 (the default, 30) to 3600")
	}
	if n.DialNetns != "" && !strings.HasPrefix(n.DialNetns, "/") {
		return invalid("network.dial_netns", "must be an absolute path, got %q", n.DialNetns)
	}
	if n.UpstreamCA != "" && !strings.HasPrefix(n.UpstreamCA, "/") {
		return invalid("network.upstream_ca", "must be an absolute path, got %q", n.UpstreamCA)
	}
	if n.Resolver != "" {
		if _, err := netip.ParseAddrPort(n.Resolver); err != nil {
			return invalid("network.resolver", "must be ip:port, got %q", n.Resolver)
		}
	}
	return nil
}

// Prefixes parses CIDRs ("203.0.113.0/24"; a bare address is its /32 or
// /128).
func Prefixes(list []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(list))
	for _, s := range list {
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, err
		}
		out = append(out, p.Masked())
	}
	return out, nil
}
