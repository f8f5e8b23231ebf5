package egress

import (
	"context"
	"fmt"
	"net"
	"runtime"

	"golang.org/x/sys/unix"
)

// InNetns runs f on a thread of its own inside the network namespace at
// path (such as /run/netns/NAME or /proc/PID/ns/net); sockets f creates
// stay in that namespace. The thread returns to its own namespace after
// f: a thread that ended instead would take with it every child it forked
// with a parent-death signal (the computers' agents).
func InNetns(path string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		home, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open this thread's network namespace: %w", err)
			return
		}
		defer unix.Close(home)
		if err := enterNetns(path); err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		err = f()
		if unix.Setns(home, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		} // else the thread stays locked and ends with this goroutine
		errc <- err
	}()
	return <-errc
}

// enterNetns moves the calling (locked) thread into a network namespace.
func enterNetns(path string) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open network namespace: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("enter network namespace %s: %w", path, err)
	}
	return nil
}

// NetnsDialer dials from inside a network namespace (Path, such as
// /run/netns/NAME): tests and benchmarks point Cubicle's upstream side into
// a namespace of their own, so no packet of theirs can leave the machine.
type NetnsDialer struct{ Path string }

// DialContext dials network, address (an IP literal and port) from the
// namespace.
func (d NetnsDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	var c net.Conn
	err := InNetns(d.Path, func() error {
		var err error
		c, err = (&net.Dialer{}).DialContext(ctx, network, address)
		return err
	})
	return c, err
}
