package egress

import (
	"fmt"
	"net"
	"os"
	"unsafe"

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
// namespace and configures it with the interface ioctls: MTU, address,
// up, default route. (Through netlink the same took ~2 ms more once the
// namespace belongs to the computer's user namespace.)
func configure(fd int) error {
	ifr, err := unix.NewIfreq(ifName)
	if err != nil {
		return err
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		return fmt.Errorf("create the TUN device: %w", err)
	}
	sock, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(sock)
	set := func(req uint, fill func(*unix.Ifreq) error) error {
		r, err := unix.NewIfreq(ifName)
		if err != nil {
			return err
		}
		if err := fill(r); err != nil {
			return err
		}
		return unix.IoctlIfreq(sock, req, r)
	}
	steps := []struct {
		what string
		do   func() error
	}{
		{"set its MTU", func() error {
			return set(unix.SIOCSIFMTU, func(r *unix.Ifreq) error { r.SetUint32(mtu); return nil })
		}},
		{"address it", func() error {
			if err := set(unix.SIOCSIFADDR, func(r *unix.Ifreq) error { return r.SetInet4Addr(computerIP.To4()) }); err != nil {
				return err
			}
			return set(unix.SIOCSIFNETMASK, func(r *unix.Ifreq) error { return r.SetInet4Addr(net.IP(net.CIDRMask(24, 32))) })
		}},
		{"bring it up", func() error {
			return set(unix.SIOCSIFFLAGS, func(r *unix.Ifreq) error { r.SetUint16(unix.IFF_UP | unix.IFF_RUNNING); return nil })
		}},
		{"route through it", func() error { return addDefaultRoute(sock, gatewayIP.To4()) }},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			return fmt.Errorf("%s: %s: %w", ifName, s.what, err)
		}
	}
	return nil
}

// rtentry is struct rtentry of <linux/route.h> (64-bit layout), for
// SIOCADDRT.
type rtentry struct {
	pad1             uint64
	dst, gw, genmask unix.RawSockaddrInet4 // each a struct sockaddr
	flags            uint16
	pad2             int16
	pad3             uint64
	pad4             uintptr
	metric           int16
	dev              uintptr
	mtu, window      uint64
	irtt             uint16
}

// addDefaultRoute adds the default route via gw.
func addDefaultRoute(sock int, gw net.IP) error {
	rt := rtentry{flags: unix.RTF_UP | unix.RTF_GATEWAY}
	for _, a := range []*unix.RawSockaddrInet4{&rt.dst, &rt.gw, &rt.genmask} {
		a.Family = unix.AF_INET
	}
	copy(rt.gw.Addr[:], gw)
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(sock), unix.SIOCADDRT, uintptr(unsafe.Pointer(&rt)))
	if errno != 0 {
		return errno
	}
	return nil
}
