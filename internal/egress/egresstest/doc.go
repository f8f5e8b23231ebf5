// Package egresstest makes a small internet for tests and benchmarks of
// internet computers: a network namespace of their own whose only
// interface is loopback, holding documentation addresses (RFC 5737) and
// servers on them — HTTP, DNS, a TCP echo and a UDP sink that counts what
// reaches it. Cubicle's upstream side is pointed into it (egress.Config's
// Dialer and Resolver), so no packet of a test can leave the machine: the
// namespace has no route anywhere else.
//
// It may import internal/egress. Tests and 'cubicle-bench net' use it:
// New takes a TB, which testing.TB satisfies.
package egresstest
