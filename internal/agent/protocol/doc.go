// Package protocol is the control channel between the host and a
// computer's agent, as both ends see it: frames (a 9-byte header and a
// bounded payload, frame.go), the kind of each frame, the JSON messages
// they carry (messages*.go) and the error codes that cross the channel and
// come back as the same sentinels (errors.go).
//
// Its types are the wire's and nothing else's: the agent's server
// (internal/agent) speaks them, the host-side client (internal/agent's
// Client) converts them to and from internal/sandbox's domain types in one
// place, and no JSON tag here reaches Cubicle's public API. It builds for
// every GOOS. It may import only the standard library.
package protocol
