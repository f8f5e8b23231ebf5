package protocol

import "errors"

// Port frames: TCP connections to 127.0.0.1 (or ::1) of the computer,
// dialled by the agent in the computer's own network namespace, and the
// list of what listens there. Numbers 56–61 (chosen away from the other
// ranges; the kinds are used in both directions where said).
//
//   - KindPortOpen (host, JSON PortOpen) on a new stream: the agent dials
//     and answers KindOK (empty object) or KindError (ErrPortRefused when
//     nothing listens). Then, on that stream:
//   - KindPortData (both ways, raw bytes, at most ChunkSize): the
//     connection's bytes. A side sends at most PortWindow bytes that the
//     other has not acknowledged.
//   - KindPortAck (both ways, 4 bytes big-endian): that many bytes were
//     consumed (written to the socket, or read by the host's consumer).
//   - KindPortEOF (both ways, empty): the sender sends nothing more
//     (half-close; the agent shuts its socket's write side).
//   - KindPortClose (host, empty): drop the connection now. From the
//     agent (JSON PortEnd) it is the stream's last frame, sent once both
//     directions ended or the connection failed or was dropped.
//   - KindPortList (host, empty) on its own stream: KindOK (JSON PortList).
const (
	KindPortOpen Kind = iota + 56
	KindPortData
	KindPortAck
	KindPortEOF
	KindPortClose
	KindPortList
)

// PortWindow is how many bytes of a port connection may travel
// unacknowledged in each direction: a peer that sends more breaks the
// protocol and the connection is dropped.
const PortWindow = 8 * ChunkSize

// MaxPortConns bounds the open port connections of one agent (the host
// bounds them per computer lower).
const MaxPortConns = 256

// ErrPortRefused: nothing listens on the port (the dial was refused).
var ErrPortRefused = errors.New("connection refused: nothing listens on that port in the computer")

func init() { codes["port_refused"] = ErrPortRefused }

// PortOpen dials Port on Addr, "127.0.0.1" (default) or "::1".
type PortOpen struct {
	Port int    `json:"port"`
	Addr string `json:"addr,omitempty"`
}

// PortEnd ends a port stream: the bytes each way and why it ended
// (empty: both directions closed cleanly).
type PortEnd struct {
	BytesIn  int64  `json:"bytes_in"`  // from the host to the socket
	BytesOut int64  `json:"bytes_out"` // from the socket to the host
	Error    string `json:"error,omitempty"`
}

// PortList is what listens for TCP in the computer's network namespace.
type PortList struct {
	Ports []Listener `json:"ports"`
	// Truncated: there were more than MaxListeners.
	Truncated bool `json:"truncated,omitempty"`
}

// MaxListeners bounds a PortList.
const MaxListeners = 1024

// Listener is one listening TCP socket: its port and address.
type Listener struct {
	Port    int    `json:"port"`
	Address string `json:"address"` // "0.0.0.0", "127.0.0.1", "::", ...
	Family  string `json:"family"`  // "tcp" or "tcp6"
}
