package egress

import (
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// private are the destinations no policy can open (the private-address
// rule): this host, its networks and whatever an address of them could
// reach (loopback, RFC 1918, link-local with 169.254.169.254, CGNAT,
// benchmarking — the range the synthetic DNS answers come from —,
// multicast, reserved, ULA, NAT64 and 6to4, which embed IPv4 addresses).
// IPv4-mapped IPv6 addresses are unmapped before they are checked.
var private = prefixes(
	"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
	"172.16.0.0/12", "192.0.0.0/24", "192.168.0.0/16", "198.18.0.0/15",
	"224.0.0.0/4", "240.0.0.0/4",
	"::/128", "::1/128", "64:ff9b::/96", "64:ff9b:1::/48", "2002::/16",
	"fc00::/7", "fe80::/10", "ff00::/8",
)

func prefixes(list ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(list))
	for i, s := range list {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// policy is a computer's compiled InternetPolicy.
type policy struct {
	exact  map[string]bool
	suffix []string // ".example.com" for "*.example.com"
	cidrs  []netip.Prefix
	// secrets are the headers set on intercepted requests, by the domain
	// pattern they were given for (normalised: "api.example.com" or
	// "*.example.com").
	secrets map[string][]sandbox.DomainSecret
}

func compile(p sandbox.InternetPolicy) (*policy, error) {
	c := &policy{exact: map[string]bool{}, cidrs: p.CIDRs}
	for _, d := range p.Domains {
		name, wild := strings.CutPrefix(d, "*.")
		name, ok := sandbox.NormalDomain(name)
		if !ok {
			return nil, fmt.Errorf("%w: %q is not a domain name or *.domain", ErrPolicy, d)
		}
		if wild {
			c.suffix = append(c.suffix, "."+name)
		} else {
			c.exact[name] = true
		}
	}
	for _, p := range p.CIDRs {
		if !p.IsValid() {
			return nil, fmt.Errorf("%w: an invalid CIDR", ErrPolicy)
		}
	}
	if err := sandbox.ValidateSecrets(p.Secrets); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPolicy, err)
	}
	for _, s := range p.Secrets {
		d := strings.ToLower(strings.TrimSuffix(s.Domain, "."))
		if !c.allowsPattern(d) {
			return nil, fmt.Errorf("%w: the secret for %s is for a domain the policy does not allow", ErrPolicy, d)
		}
		if c.secrets == nil {
			c.secrets = map[string][]sandbox.DomainSecret{}
		}
		c.secrets[d] = append(c.secrets[d], sandbox.DomainSecret{Domain: d, Name: http.CanonicalHeaderKey(s.Name), Value: s.Value})
	}
	return c, nil
}

// secretsFor returns the secrets of a name: those of the patterns "*.x"
// matching it, the farthest first, then its own (so that, set in order,
// the closest pattern wins for a header, and a name's own secret over
// every pattern's).
func (p *policy) secretsFor(name string) []sandbox.DomainSecret {
	if name == "" || len(p.secrets) == 0 {
		return nil
	}
	var out []sandbox.DomainSecret
	for i := strings.LastIndexByte(name, '.'); i > 0; i = strings.LastIndexByte(name[:i], '.') {
		out = append(out, p.secrets["*"+name[i:]]...)
	}
	return append(out, p.secrets[name]...)
}

// allowsPattern reports whether the policy allows every name a secret's
// domain pattern d covers.
func (p *policy) allowsPattern(d string) bool {
	if rest, wild := strings.CutPrefix(d, "*."); wild {
		for _, s := range p.suffix {
			if strings.HasSuffix("."+rest, s) {
				return true
			}
		}
		return false
	}
	return p.domain(d) != ""
}

// secretDomains are the domain patterns that have secrets (the computer
// CA's name constraints).
func (p *policy) secretDomains() []string {
	var out []string
	for d := range p.secrets {
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}

// domain returns the rule that allows name ("" when none does).
func (p *policy) domain(name string) string {
	if p.exact[name] {
		return "domain:" + name
	}
	for _, s := range p.suffix {
		if strings.HasSuffix(name, s) {
			return "domain:*" + s
		}
	}
	return ""
}

// literal returns the rule that allows an IP-literal destination.
func (p *policy) literal(a netip.Addr) string {
	for _, c := range p.cidrs {
		if c.Contains(a) {
			return "cidr:" + c.String()
		}
	}
	return ""
}
