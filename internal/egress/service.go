package egress

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/log"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// ErrPolicy reports an internet policy that cannot be compiled.
var ErrPolicy = errors.New("invalid internet policy")

// Resolver is Cubicle's own name resolution for allowed names.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Dialer opens the upstream side of a computer's connection.
type Dialer interface {
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// Config configures the egress service.
type Config struct {
	// Resolver and Dialer reach the internet; defaults: the host's
	// resolver and a plain net.Dialer. Tests point both into a network
	// namespace of their own (NetnsDialer).
	Resolver Resolver
	Dialer   Dialer
	// Deny is the operator's blocklist, refused whatever a policy says.
	Deny []netip.Prefix
	// HostAddrs are this host's own addresses, always refused; default:
	// every address of the host's interfaces when New runs.
	HostAddrs []netip.Addr
	// Record receives every connection's record (never payloads); may be
	// nil.
	Record func(Record)
	// DialTimeout bounds one upstream connect; default 10 s.
	DialTimeout time.Duration
	// Limiter is the per-organisation rate limit; nil: none.
	Limiter Limiter
	// RateLimited is told of every connection the Limiter refused (the
	// audit event computer.egress_rate_limited); may be nil.
	RateLimited func(Record)
	// UpstreamCA is PEM certificates trusted, besides the host's system
	// roots, for the real servers of intercepted domains (tests: their
	// test CA).
	UpstreamCA []byte
}

// Service terminates the network of every internet computer in this
// process: one userspace TCP/IP stack per computer, on a TUN device that is
// the computer's only interface besides loopback.
type Service struct {
	cfg  Config
	deny []netip.Prefix
	// roots verify the real servers of intercepted domains.
	roots *x509.CertPool

	mu   sync.Mutex
	nets map[string]*computerNet
}

var _ sandbox.Network = (*Service)(nil)

// New checks that this host can give computers a TUN device and returns
// the service.
func New(cfg Config) (*Service, error) {
	if err := tunAvailable(); err != nil {
		return nil, err
	}
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	if cfg.Dialer == nil {
		cfg.Dialer = &net.Dialer{}
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	if cfg.HostAddrs == nil {
		cfg.HostAddrs = hostAddrs()
	}
	roots, err := upstreamRoots(cfg.UpstreamCA)
	if err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, nets: map[string]*computerNet{}, roots: roots}
	s.deny = append(append(s.deny, private...), cfg.Deny...)
	for _, a := range cfg.HostAddrs {
		s.deny = append(s.deny, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return s, nil
}

// hostAddrs lists the addresses of this host's interfaces.
func hostAddrs() []netip.Addr {
	addrs, _ := net.InterfaceAddrs()
	var out []netip.Addr
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr())
		}
	}
	return out
}

// refused returns the rule that refuses an upstream address ("" when none
// does): the private-address rule, the host's addresses, the blocklist.
func (s *Service) refused(a netip.Addr) string {
	a = a.Unmap()
	for _, p := range s.deny {
		if p.Contains(a) {
			if slices.Contains(private, p) {
				return "private:" + p.String()
			}
			return "deny:" + p.String()
		}
	}
	return ""
}

// Attach gives the computer whose network namespace is netns its
// interface, terminated in this process under policy. The interface is
// made in the background; Link.Wait says when it is up.
func (s *Service) Attach(ctx context.Context, a sandbox.Attachment) (sandbox.Link, error) {
	pol, err := compile(a.Policy)
	if err != nil {
		return nil, err
	}
	n, err := s.attach(ctx, a, pol)
	if err != nil {
		return nil, fmt.Errorf("attach the computer's network: %w", err)
	}
	s.mu.Lock()
	s.nets[a.ComputerID] = n
	s.mu.Unlock()
	log.From(ctx).Debug("internet attached", "computer", a.ComputerID)
	return &link{s: s, n: n}, nil
}

// link is what Attach returns: the computer's proxy environment, and the
// end of its network.
type link struct {
	s *Service
	n *computerNet
}

func (l *link) Wait(ctx context.Context) error { return l.n.wait(ctx) }

func (l *link) Env() []string { return append(l.n.proxyEnv(), caEnv...) }

// CACert is the computer's CA certificate (PEM).
func (l *link) CACert() []byte {
	if l.n.ca == nil {
		return nil
	}
	return l.n.ca.pem
}

// caEnv points the usual TLS clients at the computer's CA bundle (OpenSSL
// and Python's ssl, requests, curl, git, pip; Node adds it to its own).
var caEnv = func() []string {
	var env []string
	for _, k := range []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "PIP_CERT", "GIT_SSL_CAINFO"} {
		env = append(env, k+"="+sandbox.CABundleFile)
	}
	return env
}()

func (l *link) Close() error {
	l.s.mu.Lock()
	delete(l.s.nets, l.n.id)
	l.s.mu.Unlock()
	return l.n.close()
}
