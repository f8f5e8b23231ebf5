package egress

import (
	"log/slog"
	"net/netip"
	"time"
)

// Verdicts of a Record.
const (
	Allowed = "allowed" // the policy allowed it and it was carried
	Refused = "refused" // the policy refused it (Rule says which part)
	Failed  = "failed"  // allowed, but it could not be carried (Error says why)
)

// Record is what the egress log keeps of one connection, UDP flow or DNS
// question: who, where, how much, when and why — never payloads.
type Record struct {
	Computer string
	Org, Key string // the computer's owner
	Proto    string // tcp, udp, dns
	// Name is the DNS name asked for or connected to by name ("" for an
	// IP literal).
	Name string
	// Addr is the upstream address dialed, or what the computer asked for
	// when nothing was dialed.
	Addr    netip.AddrPort
	Verdict string
	// Rule is what decided: "domain:example.com", "cidr:203.0.113.0/24",
	// "private:10.0.0.0/8", "deny:…", "not-allowed", "udp".
	Rule  string
	Error string
	// Sent and Received are the bytes to and from the server, counted
	// on the computer's side (TLS records included); through the proxy,
	// a CONNECT tunnel's bytes or a plain request as it was sent on.
	Sent, Received int64
	// Intercepted says the connection's TLS was terminated by Cubicle to
	// add its domain's secrets (never which, never their values).
	Intercepted    bool
	Opened, Closed time.Time
}

// LogTo returns a Record function writing one debug line per record to l.
func LogTo(l *slog.Logger) func(Record) {
	return func(r Record) {
		l.Debug("egress", "computer", r.Computer, "proto", r.Proto, "name", r.Name, "addr", r.Addr.String(),
			"verdict", r.Verdict, "rule", r.Rule, "error", r.Error, "intercepted", r.Intercepted, "sent", r.Sent, "received", r.Received,
			"ms", r.Closed.Sub(r.Opened).Milliseconds())
	}
}
