package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/waiter"

	"github.com/cubicle-sandbox/cubicle/internal/log"
)

// target is where a computer's connection may go: a name it resolved
// through Cubicle (dialed at Cubicle's own resolution of it), or an IP
// literal a CIDR rule allows.
type target struct {
	name    string
	literal netip.Addr
	rule    string
}

// decide says whether the computer may connect to dst; when it may not,
// rule names what refused it.
func (n *computerNet) decide(dst netip.Addr) (target, string) {
	if synthetic.Contains(dst) {
		name := n.names.name(dst)
		if name == "" {
			return target{}, "unknown-address"
		}
		if rule := n.pol.domain(name); rule != "" {
			return target{name: name, rule: rule}, ""
		}
		return target{name: name}, "not-allowed"
	}
	if rule := n.svc.refused(dst); rule != "" {
		return target{literal: dst}, rule
	}
	if rule := n.pol.literal(dst); rule != "" {
		return target{literal: dst, rule: rule}, ""
	}
	return target{literal: dst}, "not-allowed"
}

// onTCP sees every TCP segment no connection owns: a SYN the policy
// refuses is answered with a RST (the computer's connect fails with
// ECONNREFUSED at once); an allowed one goes to the forwarder.
func (n *computerNet) onTCP(id stack.TransportEndpointID, pkt *stack.PacketBuffer) bool {
	dst := addr(id.LocalAddress)
	if t, refused := n.decide(dst); refused != "" {
		if h := header.TCP(pkt.TransportHeader().Slice()); len(h) >= header.TCPMinimumSize && h.Flags() == header.TCPFlagSyn {
			now := time.Now()
			n.record(Record{Proto: "tcp", Name: t.name, Addr: netip.AddrPortFrom(dst, id.LocalPort),
				Verdict: Refused, Rule: refused, Opened: now, Closed: now})
		}
		return false
	}
	return n.fwd.HandlePacket(id, pkt)
}

// forward runs for an allowed SYN: it dials upstream first and only then
// completes the computer's handshake, so an upstream that refuses is a RST
// to the computer too, never a connection that opens and dies.
func (n *computerNet) forward(r *tcp.ForwarderRequest) {
	id := r.ID()
	dst := addr(id.LocalAddress)
	rec := Record{Proto: "tcp", Addr: netip.AddrPortFrom(dst, id.LocalPort), Opened: time.Now()}
	t, refused := n.decide(dst)
	rec.Name, rec.Rule = t.name, t.rule
	if refused == "" {
		if !n.reserve() {
			refused = "too-many-connections"
		} else {
			defer n.release() // the flow is spliced below, in this goroutine
		}
	}
	if refused == "" && !n.allowConn() {
		refused = rateLimited
	}
	if refused != "" { // the policy changed since the SYN, or the computer has maxFlows open
		rec.Verdict, rec.Rule = Refused, refused
		r.Complete(true)
		n.finish(rec)
		return
	}
	up, to, err := n.dial(t, id.LocalPort)
	if to.IsValid() {
		rec.Addr = to
	}
	if err != nil {
		rec.Verdict, rec.Error = Failed, err.Error()
		var pe *privateError
		if errors.As(err, &pe) {
			rec.Verdict, rec.Rule = Refused, pe.rule
		}
		r.Complete(true)
		n.finish(rec)
		return
	}
	var wq waiter.Queue
	ep, terr := r.CreateEndpoint(&wq)
	if terr != nil {
		up.Close()
		rec.Verdict, rec.Error = Failed, terr.String()
		r.Complete(true)
		n.finish(rec)
		return
	}
	r.Complete(false)
	rec.Verdict = Allowed
	n.splice(gonet.NewTCPConn(&wq, ep), up, t, rec)
}

// privateError is a name whose every address the private-address rule or
// the blocklist refuses.
type privateError struct{ name, rule string }

func (e *privateError) Error() string {
	return fmt.Sprintf("%s resolves only to refused addresses (%s)", e.name, e.rule)
}

// dial opens the upstream connection: to Cubicle's own resolution of a
// name (never an address the computer chose), or to the allowed literal.
func (n *computerNet) dial(t target, port uint16) (net.Conn, netip.AddrPort, error) {
	ctx, cancel := context.WithTimeout(n.ctx, n.svc.cfg.DialTimeout)
	defer cancel()
	addrs := []netip.Addr{t.literal}
	if t.name != "" {
		var err error
		if addrs, err = n.resolve(ctx, t.name); err != nil {
			return nil, netip.AddrPort{}, err
		}
	}
	var last error
	for _, a := range addrs {
		ap := netip.AddrPortFrom(a, port)
		c, err := n.svc.cfg.Dialer.DialContext(ctx, "tcp", ap.String())
		if err == nil {
			return c, ap, nil
		}
		last = err
	}
	return nil, netip.AddrPort{}, last
}

// flow is one spliced connection.
type flow struct {
	in, up net.Conn
}

func (f *flow) abort() {
	f.in.Close()
	f.up.Close()
}

// startFlow tracks the flow of in and up; false (recorded as failed) when
// the computer's network is closing.
func (n *computerNet) startFlow(in, up net.Conn, rec Record) (*flow, bool) {
	f := &flow{in: in, up: up}
	if !n.track(f) {
		f.abort()
		rec.Verdict, rec.Error = Failed, "the computer's network is closing"
		n.finish(rec)
		return nil, false
	}
	return f, true
}

// splice copies both ways until both directions ended, passing each
// half-close on, then records the flow with its byte counts (added to
// what rec already counts: a proxied request written upstream before). The first
// bytes from the computer are sniffed: a TLS server name or HTTP Host that
// is not the name the connection was allowed for (domain fronting) ends
// the connection, refused.
func (n *computerNet) splice(in, up net.Conn, t target, rec Record) {
	in, done := n.interceptIf(in, up, t, rec)
	if done {
		return
	}
	f, ok := n.startFlow(in, up, rec)
	if !ok {
		return
	}
	defer n.untrack(f)
	var wg sync.WaitGroup
	wg.Add(1)
	bytes := n.bytes()
	go func() {
		defer wg.Done()
		head, name := sniff(in)
		if t.name != "" && name != "" && name != t.name {
			rec.Verdict, rec.Rule = Refused, "fronting:"+name
			f.abort()
			return
		}
		if _, err := up.Write(head); err != nil {
			f.abort()
			return
		}
		rec.Sent += int64(len(head)) + n.copyHalf(up, in, bytes)
	}()
	rec.Received += n.copyHalf(in, up, bytes)
	wg.Wait()
	f.abort()
	n.finish(rec)
}

// copyHalf copies src to dst (at most at the organisation's byte rate,
// when it has one), then closes dst for writing (or wholly, for a
// connection that cannot half-close), and returns the bytes copied. The
// host side's *net.TCPConn copies through its own ReadFrom/WriteTo (32 KiB
// per direction while a flow lives), so a flow holds no larger buffer.
func (n *computerNet) copyHalf(dst, src net.Conn, limit *rate.Limiter) int64 {
	var r io.Reader = src
	if limit != nil {
		r = limitedReader{ctx: n.ctx, r: src, l: limit}
	}
	k, _ := io.Copy(dst, r)
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	} else {
		dst.Close()
	}
	return k
}

// rateLimited is the rule of a connection the organisation's rate limit
// refused.
const rateLimited = "rate-limited"

// allowConn asks the organisation's limiter for one more connection; a
// limiter that cannot answer lets it through, and that is logged.
func (n *computerNet) allowConn() bool {
	if n.svc.cfg.Limiter == nil {
		return true
	}
	ok, err := n.svc.cfg.Limiter.AllowConn(n.owner.Org)
	if err != nil {
		log.From(n.ctx).WarnContext(n.ctx, "egress rate limiter did not answer; the connection goes through",
			"computer", n.id, "org", n.owner.Org, "err", err)
		return true
	}
	return ok
}

// bytes is the organisation's byte limiter (nil: none).
func (n *computerNet) bytes() *rate.Limiter {
	if n.svc.cfg.Limiter == nil {
		return nil
	}
	return n.svc.cfg.Limiter.Bytes(n.owner.Org)
}

// finish closes a record and logs it; a refusal by the rate limit is
// also reported to RateLimited.
func (n *computerNet) finish(rec Record) {
	rec.Closed = time.Now()
	n.record(rec)
	if rec.Rule == rateLimited && n.svc.cfg.RateLimited != nil {
		rec.Computer, rec.Org, rec.Key = n.id, n.owner.Org, n.owner.Key
		n.svc.cfg.RateLimited(rec)
	}
}
