// Package agentbin carries the lean agent binary (cmd/cubicle-agent) inside
// the cubicle binary, so that cubicle stays one file while a computer's
// agent does not pay, at every start, for the initialisation of the
// hundreds of packages only the server needs. `make build` builds the agent
// into this directory and cubicle with the build tag cubicle_agent; a plain
// `go build` carries none, and computers then run the cubicle binary
// itself as their agent (the same code, slower to start).
//
// It may import only the standard library.
package agentbin

// Binary returns the agent this binary carries, or nil.
func Binary() []byte { return binary }
