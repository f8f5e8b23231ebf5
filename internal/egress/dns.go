package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
	"gvisor.dev/gvisor/pkg/waiter"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

const (
	dnsPort = 53
	// dnsIdle ends a DNS exchange (one client socket) after this long
	// without a query.
	dnsIdle = 2 * time.Second
	// maxQuery bounds one query datagram read.
	maxQuery = 4096
)

// onUDP sees every new UDP flow. DNS (port 53, to any address: 8.8.8.8 is
// answered by Cubicle too) is answered here; everything else is refused
// with an ICMP port unreachable, so a client (QUIC) fails at once and
// falls back to TCP.
func (n *computerNet) onUDP(r *udp.ForwarderRequest) bool {
	id := r.ID()
	dst := netip.AddrPortFrom(addr(id.LocalAddress), id.LocalPort)
	if id.LocalPort != dnsPort {
		now := time.Now()
		n.record(Record{Proto: "udp", Addr: dst, Verdict: Refused, Rule: "udp", Opened: now, Closed: now})
		return false
	}
	if !n.reserve() {
		return true // dropped: the client retries, as with a lost datagram
	}
	var wq waiter.Queue
	ep, terr := r.CreateEndpoint(&wq)
	if terr != nil {
		n.release()
		return false
	}
	c := gonet.NewUDPConn(&wq, ep)
	f := &flow{in: c, up: c}
	if !n.track(f) {
		c.Close()
		n.release()
		return true
	}
	go func() {
		defer n.release()
		defer n.untrack(f)
		defer c.Close()
		n.serveDNS(c, dst)
	}()
	return true
}

// serveDNS answers the queries of one client socket until it is idle.
func (n *computerNet) serveDNS(c net.Conn, dst netip.AddrPort) {
	buf := make([]byte, maxQuery)
	for {
		c.SetReadDeadline(time.Now().Add(dnsIdle))
		k, err := c.Read(buf)
		if err != nil {
			return
		}
		if reply := n.answer(buf[:k], dst); reply != nil {
			c.Write(reply)
		}
	}
}

// answer builds the reply to one query: NXDOMAIN for a name outside the
// policy (or one that does not exist), the name's synthetic address for an
// A question, no records for anything else. nil: not a query to answer.
func (n *computerNet) answer(q []byte, dst netip.AddrPort) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(q)
	if err != nil || h.Response {
		return nil
	}
	qs, err := p.AllQuestions()
	reply := dnsmessage.Header{ID: h.ID, Response: true, OpCode: h.OpCode,
		RecursionDesired: h.RecursionDesired, RecursionAvailable: true}
	if err != nil || len(qs) != 1 || h.OpCode != 0 {
		reply.RCode = dnsmessage.RCodeFormatError
		if err == nil && h.OpCode != 0 {
			reply.RCode = dnsmessage.RCodeNotImplemented
		}
		return build(reply, nil, netip.Addr{})
	}
	question := qs[0]
	rec := Record{Proto: "dns", Addr: dst, Opened: time.Now()}
	a, rcode := n.lookup(question, &rec)
	reply.RCode = rcode
	n.finish(rec)
	return build(reply, &question, a)
}

// lookup decides one question and fills rec; a is the synthetic address
// to answer with (invalid: no record).
func (n *computerNet) lookup(q dnsmessage.Question, rec *Record) (netip.Addr, dnsmessage.RCode) {
	name, ok := sandbox.NormalDomain(q.Name.String())
	rec.Name = name
	if !ok {
		rec.Verdict, rec.Rule = Refused, "not-a-name"
		return netip.Addr{}, dnsmessage.RCodeNameError
	}
	if rec.Rule = n.pol.domain(name); rec.Rule == "" || q.Class != dnsmessage.ClassINET {
		rec.Verdict, rec.Rule = Refused, "not-allowed"
		return netip.Addr{}, dnsmessage.RCodeNameError
	}
	ctx, cancel := context.WithTimeout(n.ctx, n.svc.cfg.DialTimeout)
	defer cancel()
	if _, err := n.resolve(ctx, name); err != nil {
		rec.Verdict, rec.Error = Failed, err.Error()
		var pe *privateError
		switch {
		case errors.As(err, &pe):
			rec.Verdict, rec.Rule = Refused, pe.rule
			return netip.Addr{}, dnsmessage.RCodeNameError
		case notFound(err):
			return netip.Addr{}, dnsmessage.RCodeNameError
		}
		return netip.Addr{}, dnsmessage.RCodeServerFailure
	}
	rec.Verdict = Allowed
	if q.Type != dnsmessage.TypeA {
		return netip.Addr{}, dnsmessage.RCodeSuccess
	}
	a, err := n.names.assign(name)
	if err != nil {
		rec.Verdict, rec.Error = Failed, err.Error()
		return netip.Addr{}, dnsmessage.RCodeRefused
	}
	return a, dnsmessage.RCodeSuccess
}

// build encodes a reply; q and a may be absent.
func build(h dnsmessage.Header, q *dnsmessage.Question, a netip.Addr) []byte {
	b := dnsmessage.NewBuilder(nil, h)
	b.EnableCompression()
	if q != nil {
		b.StartQuestions()
		b.Question(*q)
		if a.IsValid() {
			b.StartAnswers()
			b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 5},
				dnsmessage.AResource{A: a.As4()})
		}
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}
