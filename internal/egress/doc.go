// Package egress is the internet of computers whose network mode is
// "internet": nothing leaves such a computer except through here.
//
// The computer's only interface besides loopback is a TUN device
// (tun_linux.go) whose other end is a userspace TCP/IP stack in this
// process, one per computer (gVisor's netstack, stack.go). So every packet
// ends here, and what is refused is refused visibly: a connection the
// policy refuses gets a RST at its SYN (ECONNREFUSED), an allowed one is
// dialed upstream before its handshake completes (an upstream refusal is
// a RST too), UDP other than DNS gets an ICMP port unreachable (QUIC falls
// back to TCP at once). If this process dies, the TUN goes with it and the
// computer has no network at all. docs/design/egress.md has the
// measurements behind this choice; docs/network.md the threat model.
//
// DNS to any address is answered here (dns.go): a name outside the policy
// is NXDOMAIN, an allowed name gets a synthetic address of its own
// (names.go, 198.18.0.0/15), so a connection's destination names what it
// is for, and the upstream dial goes to Cubicle's own resolution of that
// name (tcp.go), never to an address the computer chose. IP literals are
// reached only through a CIDR rule. The private-address rule (policy.go)
// and the operator's blocklist refuse every address of this host and its
// networks whatever a policy says, on every resolution (no DNS rebinding).
//
// Every connection, refusal and question is a Record (record.go), handed
// to the service's Record function: never payloads.
//
// It may import internal/sandbox (the InternetPolicy and Network it
// implements) and internal/log.
package egress
