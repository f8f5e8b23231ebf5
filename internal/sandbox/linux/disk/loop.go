//go:build linux

package disk

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// attachTries bounds retries when another process takes the device that
// LOOP_CTL_GET_FREE just offered us (it offers, it does not reserve).
const attachTries = 10

// attachMu serializes GET_FREE..CONFIGURE inside this process so our own
// goroutines never race each other for the same device; the retries are
// for other processes.
var attachMu sync.Mutex

// loopConfigure is a variable so tests can exercise the EBUSY retry and the
// pre-5.8 fallback on a current kernel.
var loopConfigure = unix.IoctlLoopConfigure

// Loop is an attached loop device. Its open fd is what keeps an
// autoclearing device alive until the filesystem on it is mounted.
type Loop struct {
	Path   string // /dev/loopN
	Number int    // N

	mu sync.Mutex
	fd int // -1 once closed
}

// Attach attaches the image at imagePath to a free loop device, with
// autoclear (the device detaches itself when its last user goes away), no
// partition scan and buffered I/O. Keep the Loop open until the filesystem
// is mounted, then Close it; the device is freed when the mount goes away.
func Attach(ctx context.Context, imagePath string, readOnly bool) (*Loop, error) {
	return attach(ctx, imagePath, readOnly, true)
}

// attach is Attach with autoclear optional, so tests can make real orphans.
func attach(ctx context.Context, imagePath string, readOnly, autoclear bool) (*Loop, error) {
	mode := unix.O_RDWR
	if readOnly {
		mode = unix.O_RDONLY
	}
	img, err := unix.Open(imagePath, mode|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("attach loop device: open image %s: %w", imagePath, err)
	}
	defer unix.Close(img) // the device holds its own reference to the file
	ctl, err := unix.Open("/dev/loop-control", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("attach loop device: open /dev/loop-control: %w (is the loop module loaded? try modprobe loop)", err)
	}
	defer unix.Close(ctl)

	info := unix.LoopInfo64{}
	if autoclear {
		info.Flags |= unix.LO_FLAGS_AUTOCLEAR
	}
	if readOnly {
		info.Flags |= unix.LO_FLAGS_READ_ONLY
	}
	// Informational only (LOOP_GET_STATUS); sysfs has the full path.
	copy(info.File_name[:len(info.File_name)-1], imagePath)

	var lastErr error
	for try := range attachTries {
		if try > 0 {
			// Jitter so two processes that collided don't collide again.
			d := time.Duration(try)*time.Millisecond + rand.N(2*time.Millisecond)
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("attach loop device: %w", ctx.Err())
			case <-time.After(d):
			}
		} else if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("attach loop device: %w", err)
		}
		l, retry, err := attachOnce(ctl, img, &info)
		if err == nil {
			return l, nil
		}
		if !retry {
			return nil, fmt.Errorf("attach loop device for %s: %w", imagePath, err)
		}
		lastErr = err
	}
	return nil, fmt.Errorf("attach loop device for %s: other processes took the free device %d times in a row, try again: %w",
		imagePath, attachTries, lastErr)
}

// attachOnce binds img to the device GET_FREE offers. retry reports a lost
// race for that device.
func attachOnce(ctl, img int, info *unix.LoopInfo64) (l *Loop, retry bool, err error) {
	attachMu.Lock()
	defer attachMu.Unlock()
	n, err := unix.IoctlRetInt(ctl, unix.LOOP_CTL_GET_FREE)
	if err != nil {
		return nil, false, fmt.Errorf("no free loop device (is the loop module loaded? is max_loop reached?): %w", err)
	}
	path := "/dev/loop" + strconv.Itoa(n)
	dev, err := openLoop(path, n)
	if errors.Is(err, unix.ENXIO) || errors.Is(err, unix.ENODEV) {
		return nil, true, fmt.Errorf("open %s: %w (removed meanwhile)", path, err)
	}
	if err != nil {
		return nil, false, fmt.Errorf("open %s: %w", path, err)
	}
	err = loopConfigure(dev, &unix.LoopConfig{Fd: uint32(img), Info: *info})
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOTTY) {
		err = configureLegacy(dev, img, info) // kernel before 5.8
	}
	if err != nil {
		unix.Close(dev)
		if errors.Is(err, unix.EBUSY) {
			return nil, true, fmt.Errorf("configure %s: %w (taken by another process)", path, err)
		}
		return nil, false, fmt.Errorf("configure %s: %w", path, err)
	}
	return &Loop{Path: path, Number: n, fd: dev}, false, nil
}

// configureLegacy does LOOP_CONFIGURE's job in two steps. A crash between
// them leaves a device without autoclear; DetachOrphans cleans those up.
func configureLegacy(dev, img int, info *unix.LoopInfo64) error {
	if err := unix.IoctlSetInt(dev, unix.LOOP_SET_FD, img); err != nil {
		return fmt.Errorf("LOOP_SET_FD: %w", err)
	}
	st := *info
	st.Flags &^= unix.LO_FLAGS_READ_ONLY // not settable here; implied by a read-only image fd
	if err := unix.IoctlLoopSetStatus64(dev, &st); err != nil {
		unix.IoctlSetInt(dev, unix.LOOP_CLR_FD, 0)
		return fmt.Errorf("LOOP_SET_STATUS64: %w", err)
	}
	return nil
}

// openLoop opens /dev/loopN, creating the node when /dev is not devtmpfs
// (containers often have a static /dev without new loop nodes).
func openLoop(path string, n int) (int, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if !errors.Is(err, unix.ENOENT) {
		return fd, err
	}
	b, rerr := os.ReadFile(fmt.Sprintf("/sys/block/loop%d/dev", n))
	if rerr != nil {
		return -1, err
	}
	var major, minor uint32
	if _, serr := fmt.Sscanf(strings.TrimSpace(string(b)), "%d:%d", &major, &minor); serr != nil {
		return -1, err
	}
	merr := unix.Mknod(path, unix.S_IFBLK|0o660, int(unix.Mkdev(major, minor)))
	if merr != nil && !errors.Is(merr, unix.EEXIST) {
		return -1, fmt.Errorf("%w (and creating the device node failed: %v)", err, merr)
	}
	return unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
}

// Close closes our fd on the device. If the device is mounted it stays
// until unmount; if not, autoclear detaches it now. Safe to call twice.
func (l *Loop) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closeLocked()
}

// Detach detaches the device (for error paths before mounting) and closes
// our fd. If someone else still has the device open, the kernel only marks
// it autoclear and detaches it when they let go.
func (l *Loop) Detach() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fd < 0 {
		return fmt.Errorf("detach %s: already closed", l.Path)
	}
	err := unix.IoctlSetInt(l.fd, unix.LOOP_CLR_FD, 0)
	if errors.Is(err, unix.ENXIO) {
		err = nil // not bound any more: nothing to detach
	}
	if cerr := l.closeLocked(); err == nil {
		return cerr
	}
	return fmt.Errorf("detach %s: %w", l.Path, err)
}

func (l *Loop) closeLocked() error {
	if l.fd < 0 {
		return nil
	}
	err := unix.Close(l.fd)
	l.fd = -1
	if err != nil {
		return fmt.Errorf("close %s: %w", l.Path, err)
	}
	return nil
}
