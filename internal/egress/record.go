package egress

import (
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
	Rule           string
	Error          string
	Sent, Received int64 // bytes from and to the computer
	Opened, Closed time.Time
}
