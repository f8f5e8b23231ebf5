package egress

import (
	"context"
	"fmt"
	"net"
	"runtime"

	"golang.org/x/sys/unix"
)

// NetnsDialer dials from inside a network namespace (Path, such as
// /run/netns/NAME): tests and benchmarks point Cubicle's upstream side into
// a namespace of their own, so no packet of theirs can leave the machine.
type NetnsDialer struct{ Path string }

// DialContext dials network, address (an IP literal and port) from the
// namespace.
func (d NetnsDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// Never unlocked: a thread that entered another namespace ends
		// with its goroutine.
		runtime.LockOSThread()
		if err := enterNetns(d.Path); err != nil {
			ch <- result{nil, err}
			return
		}
		c, err := (&net.Dialer{}).DialContext(ctx, network, address)
		ch <- result{c, err}
	}()
	r := <-ch
	return r.c, r.err
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
