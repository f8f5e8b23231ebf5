// Package agent is the in-computer side of Cubicle and its host-side client.
//
// The agent runs as PID 1 inside a computer (after internal/sandbox/linux has
// built its namespaces, mounts and privileges). It starts and reaps every
// process there, streams their output, and performs file operations with the
// sandbox user's privileges, confined to /workspace. The host talks to it over
// a framed control channel (a socketpair inherited as a file descriptor, with no
// path inside the computer). Every frame is bounded in both directions.
//
// This package imports only the standard library and golang.org/x/sys.
package agent
