package bench

import (
	"context"
	"net"
	"net/http"
	"syscall"

	"golang.org/x/sys/unix"
)

// quickAckClient is an HTTP client whose connections acknowledge every
// segment at once: TCP_QUICKACK is set before each read, since Linux
// clears it again by itself. jupyter_server writes a request's messages as
// separate small WebSocket frames on a socket without TCP_NODELAY, so each
// frame after the first waits (Nagle) for the ACK of the one before, which
// an ordinary Linux client delays by up to 40 ms. A client with quick ACKs
// measures jupyter_server without that stall (issue 15 goal 5).
func quickAckClient() *http.Client {
	d := &net.Dialer{}
	return &http.Client{Transport: &http.Transport{
		DisableCompression: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			tc, ok := c.(*net.TCPConn)
			if !ok {
				return c, nil
			}
			raw, err := tc.SyscallConn()
			if err != nil {
				c.Close()
				return nil, err
			}
			return &quickAckConn{TCPConn: tc, raw: raw}, nil
		},
	}}
}

// quickAckConn sets TCP_QUICKACK before every read.
type quickAckConn struct {
	*net.TCPConn
	raw syscall.RawConn
}

func (c *quickAckConn) Read(b []byte) (int, error) {
	c.raw.Control(func(fd uintptr) {
		unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_QUICKACK, 1)
	})
	return c.TCPConn.Read(b)
}
