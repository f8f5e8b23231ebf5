package linux

import (
	"context"
	"net"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

var _ sandbox.Ports = (*computer)(nil)

// ListPorts lists what listens in the computer (its agent reads its
// network namespace's /proc/net/tcp and tcp6).
func (c *computer) ListPorts(ctx context.Context) (sandbox.PortList, error) {
	return c.client.ListPorts(ctx)
}

// DialPort connects to 127.0.0.1:port in the computer: the agent dials in
// the computer's network namespace and relays the bytes.
func (c *computer) DialPort(ctx context.Context, port int) (net.Conn, error) {
	return c.client.DialPort(ctx, port)
}
