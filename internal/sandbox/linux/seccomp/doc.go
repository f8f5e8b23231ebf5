// Package seccomp builds and installs the seccomp filter for untrusted code.
//
// Docker's default seccomp profile (github.com/moby/profiles/seccomp),
// evaluated for a process without capabilities, is compiled here in pure Go
// (no cgo, no libseccomp) into a classic BPF program for x86_64 and installed
// with seccomp(2). Any other architecture or ABI (i386 via int 0x80, x32) is
// killed by the filter.
//
// This package may import only golang.org/x/sys, github.com/moby/profiles/seccomp
// and github.com/opencontainers/runtime-spec (plus the standard library), so it
// stays small and auditable.
package seccomp
