package sandbox

import (
	"context"
	"errors"
	"net"
)

// Ports reaches TCP servers listening inside a computer. It is optional
// (a driver's Sandbox may implement it): the caller asserts it.
type Ports interface {
	// ListPorts lists the listening TCP sockets of the computer's network
	// namespace.
	ListPorts(ctx context.Context) (PortList, error)
	// DialPort connects to 127.0.0.1:port inside the computer (the
	// computer's own loopback, never the host's): ErrPortRefused when
	// nothing listens there. The connection's CloseWrite half-closes it.
	DialPort(ctx context.Context, port int) (net.Conn, error)
}

// ErrPortRefused: nothing listens on the port inside the computer.
var ErrPortRefused = errors.New("connection refused: nothing listens on that port in the computer")

// PortList is what listens in a computer.
type PortList struct {
	Ports     []Listener `json:"ports"`
	Truncated bool       `json:"truncated,omitempty"`
}

// Listener is one listening TCP socket of a computer: its port, its
// address ("0.0.0.0", "127.0.0.1", "::") and family ("tcp", "tcp6").
type Listener struct {
	Port    int    `json:"port"`
	Address string `json:"address"`
	Family  string `json:"family"`
}
