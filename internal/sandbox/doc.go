// Package sandbox defines what a computer is to the rest of Cubicle: a
// Driver that creates computers from a Spec, and the Sandbox interface, made
// of small parts a consumer takes one of: Lifecycle (identity, kill,
// destroy, death), Processes (exec), Background (processes that outlive a
// call, held by the computer), Files (/workspace), Python (the session
// kernel) and Kernels (a relayed kernel for Jupyter clients).
//
// Its types (types.go) are the domain's: plain structs without JSON tags
// (Spec and Mount keep theirs, they are the driver's record format), with
// durations as time.Duration, and its own error kinds (errors.go) that a
// driver wraps with its message. No wire type of the control channel
// reaches this package: the agent's host-side client converts
// internal/agent/protocol to these types, and each transport has its own
// shapes of them (internal/httpapi/models.go).
//
// Implementations live in subpackages (internal/sandbox/linux); the one fake
// for tests is internal/sandbox/sandboxtest. It builds for every GOOS. It
// may import only internal/kernel (for kernel.Output) and the standard
// library.
package sandbox
