package egress

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"sync"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/fdbased"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

const (
	nicID = 1
	// maxInFlight bounds the connections a computer has in their
	// handshake (the forwarder dials before it answers the SYN).
	maxInFlight = 256
	// maxFlows bounds a computer's open connections and DNS exchanges.
	maxFlows = 256
	// tcpBuffer bounds what one connection's send or receive buffer in
	// the stack holds (grown from a quarter by auto-tuning): with
	// maxFlows, at most 256 MiB of a computer's data waits in Cubicle.
	tcpBuffer = 512 << 10
)

// computerNet is one computer's network: a TCP/IP stack of its own on the
// computer's TUN device. Every connection the computer opens is decided
// here, dialed by Cubicle and spliced; DNS is answered here; everything
// else is refused by the stack itself (RST, ICMP port unreachable).
type computerNet struct {
	svc    *Service
	id     string
	owner  sandbox.Owner
	pol    *policy
	fd     int
	st     *stack.Stack
	fwd    *tcp.Forwarder
	names  *names
	token  string       // the password of the computer's proxy credentials
	ca     *computerCA  // intercepts the domains with secrets (nil: none)
	proxyL net.Listener // the proxy on the gateway address

	plugged chan struct{} // closed when plug returned
	plugErr error         // why plug failed (read after plugged)

	ctx    context.Context // ends at close: every dial and flow with it
	cancel context.CancelFunc

	mu    sync.Mutex
	flows map[*flow]struct{}
	slots int // reserved of maxFlows (reserve)
	shut  bool
	once  sync.Once
}

// attach makes what the computer's Init needs (its proxy credentials and
// CA) and starts plugging its interface in the background: the TUN and the
// stack (~4 ms) are made while the agent boots, and the driver waits for
// them (wait) before any process of the computer runs.
func (s *Service) attach(ctx context.Context, a sandbox.Attachment, pol *policy) (*computerNet, error) {
	var tok [16]byte
	rand.Read(tok[:])
	n := &computerNet{svc: s, id: a.ComputerID, owner: a.Owner, pol: pol, fd: -1, names: newNames(), flows: map[*flow]struct{}{},
		token: hex.EncodeToString(tok[:]), plugged: make(chan struct{})}
	n.ctx, n.cancel = context.WithCancel(context.WithoutCancel(ctx))
	// Only a computer with secrets has a CA: nothing of another is ever
	// intercepted (and making one costs ~1.7 ms of its start).
	if domains := pol.secretDomains(); len(domains) > 0 {
		var err error
		if n.ca, err = newCA(a.ComputerID, domains); err != nil {
			n.cancel()
			return nil, err
		}
	}
	go n.plug(a.Netns)
	return n, nil
}

// plug opens the TUN in the computer's network namespace and builds the
// stack on it.
func (n *computerNet) plug(netns string) {
	defer close(n.plugged)
	fd, err := openTUN(netns)
	if err != nil {
		n.plugErr = err
		return
	}
	n.fd = fd
	n.plugErr = n.build()
}

// wait returns once the computer's interface is up, or why it is not.
func (n *computerNet) wait(ctx context.Context) error {
	select {
	case <-n.plugged:
		if n.plugErr != nil {
			return fmt.Errorf("attach the computer's network: %w", n.plugErr)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// build makes the stack: IPv4, TCP and UDP, a NIC that takes packets for
// every address (promiscuous) and answers from any (spoofing), and the
// handlers that decide each new flow.
func (n *computerNet) build() error {
	ep, err := fdbased.New(&fdbased.Options{FDs: []int{n.fd}, MTU: mtu, RXChecksumOffload: true})
	if err != nil {
		return fmt.Errorf("link endpoint: %w", err)
	}
	n.st = stack.New(stack.Options{
		NetworkProtocols:   []stack.NetworkProtocolFactory{ipv4.NewProtocol},
		TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol, udp.NewProtocol},
	})
	sack := tcpip.TCPSACKEnabled(true)
	rcv := tcpip.TCPReceiveBufferSizeRangeOption{Min: 4 << 10, Default: tcpBuffer / 4, Max: tcpBuffer}
	snd := tcpip.TCPSendBufferSizeRangeOption{Min: 4 << 10, Default: tcpBuffer / 4, Max: tcpBuffer}
	for _, opt := range []tcpip.SettableTransportProtocolOption{&sack, &rcv, &snd} {
		if terr := n.st.SetTransportProtocolOption(tcp.ProtocolNumber, opt); terr != nil {
			return fmt.Errorf("tcp options: %s", terr)
		}
	}
	// The handlers are in place before the NIC exists: its reader starts
	// delivering packets at once.
	n.fwd = tcp.NewForwarder(n.st, 0, maxInFlight, n.forward)
	n.st.SetTransportProtocolHandler(tcp.ProtocolNumber, n.onTCP)
	n.st.SetTransportProtocolHandler(udp.ProtocolNumber, udp.NewForwarder(n.st, n.onUDP).HandlePacket)
	if terr := n.st.CreateNIC(nicID, ep); terr != nil {
		return fmt.Errorf("create NIC: %s", terr)
	}
	if terr := n.st.SetPromiscuousMode(nicID, true); terr != nil {
		return fmt.Errorf("promiscuous NIC: %s", terr)
	}
	if terr := n.st.SetSpoofing(nicID, true); terr != nil {
		return fmt.Errorf("spoofing NIC: %s", terr)
	}
	n.st.SetRouteTable([]tcpip.Route{{Destination: header.IPv4EmptySubnet, NIC: nicID}})
	gw := tcpip.AddrFrom4(netip.MustParseAddr(sandbox.Nameserver).As4())
	if terr := n.st.AddProtocolAddress(nicID, tcpip.ProtocolAddress{Protocol: ipv4.ProtocolNumber,
		AddressWithPrefix: gw.WithPrefix()}, stack.AddressProperties{}); terr != nil {
		return fmt.Errorf("gateway address: %s", terr)
	}
	l, err := gonet.ListenTCP(n.st, tcpip.FullAddress{NIC: nicID, Addr: gw, Port: proxyPort}, ipv4.ProtocolNumber)
	if err != nil {
		return fmt.Errorf("proxy: %w", err)
	}
	n.proxyL = l
	go n.serveProxy(l)
	return nil
}

// close ends the computer's network: no new flow, every open one closed
// (and recorded), the stack stopped, the TUN closed. Safe to call twice.
func (n *computerNet) close() error {
	n.once.Do(func() {
		<-n.plugged
		n.cancel()
		n.mu.Lock()
		n.shut = true
		flows := make([]*flow, 0, len(n.flows))
		for f := range n.flows {
			flows = append(flows, f)
		}
		n.mu.Unlock()
		if n.proxyL != nil {
			n.proxyL.Close()
		}
		for _, f := range flows {
			f.abort()
		}
		if n.st != nil {
			n.st.RemoveNIC(nicID) // stops and waits for the reader of the TUN
			n.st.Close()
			n.st.Wait()
		}
		if n.fd >= 0 {
			unix.Close(n.fd)
		}
	})
	return nil
}

// reserve takes one of the computer's maxFlows slots for a connection, DNS
// exchange or proxy client, before anything is dialed or answered; false
// when all are taken or the network is closing. Each reserve is paired
// with a release.
func (n *computerNet) reserve() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.shut || n.slots >= maxFlows {
		return false
	}
	n.slots++
	return true
}

func (n *computerNet) release() {
	n.mu.Lock()
	n.slots--
	n.mu.Unlock()
}

// track registers an open flow, so close ends it; false once the network
// is closing.
func (n *computerNet) track(f *flow) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.shut {
		return false
	}
	n.flows[f] = struct{}{}
	return true
}

func (n *computerNet) untrack(f *flow) {
	n.mu.Lock()
	delete(n.flows, f)
	n.mu.Unlock()
}

// record hands a finished decision to the service's log.
func (n *computerNet) record(r Record) {
	r.Computer, r.Org, r.Key = n.id, n.owner.Org, n.owner.Key
	if n.svc.cfg.Record != nil {
		n.svc.cfg.Record(r)
	}
}

// addr converts a stack address to netip.
func addr(a tcpip.Address) netip.Addr {
	if a.Len() == 4 {
		return netip.AddrFrom4(a.As4())
	}
	return netip.AddrFrom16(a.As16())
}
