package egress

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// synthetic is where a computer's DNS answers come from (RFC 2544's
// benchmarking range, never routed): each allowed name gets an address of
// its own for the computer's life, so a connection says by its destination
// which name it is for. The computer never learns a real address.
var synthetic = netip.MustParsePrefix("198.18.0.0/15")

const (
	// maxNames bounds the names one computer can have addresses for.
	maxNames = 4096
	// resolvedFor is how long Cubicle's resolution of a name is reused.
	resolvedFor = 30 * time.Second
)

// errTooManyNames answers a computer that asked for more than maxNames.
var errTooManyNames = errors.New("too many names")

// names is one computer's map between allowed names and their synthetic
// addresses, and Cubicle's cached resolution of each.
type names struct {
	mu       sync.Mutex
	next     netip.Addr
	byName   map[string]netip.Addr
	byAddr   map[netip.Addr]string
	resolved map[string]resolution
}

type resolution struct {
	addrs []netip.Addr
	at    time.Time
}

func newNames() *names {
	return &names{next: synthetic.Addr().Next(), byName: map[string]netip.Addr{},
		byAddr: map[netip.Addr]string{}, resolved: map[string]resolution{}}
}

// assign returns name's synthetic address, giving it one the first time.
func (m *names) assign(name string) (netip.Addr, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if a, ok := m.byName[name]; ok {
		return a, nil
	}
	if len(m.byName) >= maxNames {
		return netip.Addr{}, errTooManyNames
	}
	a := m.next
	m.next = a.Next()
	m.byName[name], m.byAddr[a] = a, name
	return a, nil
}

// name returns the name a synthetic address was given to ("" for none).
func (m *names) name(a netip.Addr) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.byAddr[a]
}

// resolve returns Cubicle's resolution of an allowed name, without the
// addresses the private-address rule or the blocklist refuses (checked on
// every answer, so a name that rebinds to a private address is refused).
// A name with no address left is a *privateError.
func (n *computerNet) resolve(ctx context.Context, name string) ([]netip.Addr, error) {
	n.names.mu.Lock()
	r, ok := n.names.resolved[name]
	n.names.mu.Unlock()
	if !ok || time.Since(r.at) > resolvedFor {
		addrs, err := n.svc.cfg.Resolver.LookupNetIP(ctx, "ip", name)
		if err != nil {
			return nil, fmt.Errorf("resolve %s: %w", name, err)
		}
		// IPv4 first, then IPv6: the computer itself speaks IPv4 only
		// (its synthetic address), the upstream side both.
		slices.SortStableFunc(addrs, func(a, b netip.Addr) int { return cmp.Compare(family(a), family(b)) })
		r = resolution{addrs: addrs, at: time.Now()}
		n.names.mu.Lock()
		n.names.resolved[name] = r
		n.names.mu.Unlock()
	}
	var usable []netip.Addr
	rule := ""
	for _, a := range r.addrs {
		if why := n.svc.refused(a); why != "" {
			rule = why
			continue
		}
		usable = append(usable, a.Unmap())
	}
	if len(usable) == 0 {
		if rule == "" {
			return nil, fmt.Errorf("resolve %s: no address", name)
		}
		return nil, &privateError{name: name, rule: rule}
	}
	return usable, nil
}

// family orders addresses: IPv4 (0) before IPv6 (1).
func family(a netip.Addr) int {
	if a.Unmap().Is4() {
		return 0
	}
	return 1
}

// notFound reports whether a resolution error says the name does not exist.
func notFound(err error) bool {
	var de *net.DNSError
	return errors.As(err, &de) && de.IsNotFound
}
