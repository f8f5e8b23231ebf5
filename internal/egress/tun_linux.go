package egress

import (
	"fmt"
	"net"
	"os"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// The computer's side of its interface. Every packet it sends there ends
// in this process, so these addresses never appear on any real network.
const (
	ifName = "eth0"
	// mtu is large on purpose: the stack writes one segment per write to
	// the TUN, and at 1500 throughput falls tenfold (docs/design/egress.md).
	mtu = 65520
)

var (
	computerIP = net.IPv4(10, 200, 0, 2)
	// gatewayIP is the computer's next hop and sandbox.Nameserver (DNS to
	// any address on port 53 is answered by Cubicle alike).
	gatewayIP = net.ParseIP(sandbox.Nameserver)
)

// tunAvailable checks that this host can give computers a TUN device.
func tunAvailable() error {
	f, err := os.OpenFile("/dev/net/tun", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("internet computers need /dev/net/tun (load the tun module with 'modprobe tun', or pass the device into this container): %w", err)
	}
	return f.Close()
}

// openTUN creates the computer's interface in the network namespace at
// netns, configures it (address, MTU, default route) and returns the TUN's
// descriptor, which stays usable from any thread.
func openTUN(netns string) (int, error) {
	fd := -1
	err := InNetns(netns, func() error {
		var err error
		if fd, err = unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0); err != nil {
			return fmt.Errorf("open /dev/net/tun: %w", err)
		}
		if err := configure(fd); err != nil {
			unix.Close(fd)
			fd = -1
			return err
		}
		return nil
	})
	return fd, err
}

// configure makes fd the TUN device eth0 of this thread's network
// namespace and configures it with netlink.
func configure(fd int) error {
	ifr, err := unix.NewIfreq(ifName)
	if err != nil {
		return err
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		return fmt.Errorf("create the TUN device: %w", err)
	}
	index, err := ifIndex(ifr)
	if err != nil {
		return fmt.Errorf("find %s: %w", ifName, err)
	}
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE) // its socket is in this namespace
	if err != nil {
		return fmt.Errorf("netlink: %w", err)
	}
	defer h.Close()
	// Only the index is needed (asking netlink for the link by name took
	// ~1.4 ms of a 3.4 ms attach).
	link := &netlink.Tuntap{LinkAttrs: netlink.LinkAttrs{Index: index, Name: ifName}}
	steps := []struct {
		what string
		do   func() error
	}{
		{"set its MTU", func() error { return h.LinkSetMTU(link, mtu) }},
		{"address it", func() error {
			return h.AddrAdd(link, &netlink.Addr{IPNet: &net.IPNet{IP: computerIP, Mask: net.CIDRMask(24, 32)}})
		}},
		{"bring it up", func() error { return h.LinkSetUp(link) }},
		{"route through it", func() error {
			return h.RouteAdd(&netlink.Route{LinkIndex: link.Attrs().Index, Gw: gatewayIP})
		}},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			return fmt.Errorf("%s: %s: %w", ifName, s.what, err)
		}
	}
	return nil
}

// ifIndex returns the index of the interface named in ifr, in this
// thread's network namespace.
func ifIndex(ifr *unix.Ifreq) (int, error) {
	sock, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(sock)
	if err := unix.IoctlIfreq(sock, unix.SIOCGIFINDEX, ifr); err != nil {
		return 0, err
	}
	return int(ifr.Uint32()), nil
}
