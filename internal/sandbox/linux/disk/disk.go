//go:build linux

package disk

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// MountFlags returns the mount(2) flags and data for a disk's ext4
// filesystem. errors=remount-ro stops a corrupted image from being
// written further; nosuid/nodev because the image content is the
// sandbox's, not ours.
func MountFlags() (flags uintptr, data string) {
	return unix.MS_NOSUID | unix.MS_NODEV, "errors=remount-ro"
}

// DetachOrphans detaches every loop device whose backing file is under dir
// and that is not mounted, and returns how many it detached. It is for
// garbage collection after a crash: a device that is not autoclear (legacy
// attach interrupted, or attached by hand) outlives its process.
//
// "Mounted" is checked in our mount table and, through an O_EXCL open, in
// every other mount namespace. Autoclear devices are skipped: one that is
// still bound is held by someone and frees itself when they let go. A
// non-autoclear device some process merely holds open is not torn down
// under it either: the kernel marks it autoclear and detaches it on that
// process's close.
func DetachOrphans(dir string) (int, error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return 0, fmt.Errorf("detach orphan loop devices: %w", err)
	}
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r // sysfs reports the resolved path
	}
	prefix := strings.TrimSuffix(root, "/") + "/"
	mounted, err := mountedDevices()
	if err != nil {
		return 0, fmt.Errorf("detach orphan loop devices: %w", err)
	}
	ents, err := os.ReadDir("/sys/block")
	if err != nil {
		return 0, fmt.Errorf("detach orphan loop devices: list /sys/block: %w", err)
	}
	count := 0
	var errs []error
	for _, e := range ents {
		n, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "loop"))
		if !strings.HasPrefix(e.Name(), "loop") || err != nil {
			continue
		}
		backing, ok := backingFile(n)
		if !ok || !strings.HasPrefix(backing, prefix) {
			continue
		}
		path := "/dev/loop" + strconv.Itoa(n)
		if mounted[path] || mounted[devNumber(n)] {
			continue
		}
		if autoclear(n) {
			// Still bound, so someone holds it (mid-Attach, or mounted in
			// another namespace); it frees itself when they let go, and
			// LOOP_CLR_FD would change nothing.
			continue
		}
		done, err := detachUnmounted(path, n)
		if err != nil {
			errs = append(errs, err)
		}
		if done {
			count++
		}
	}
	if err := errors.Join(errs...); err != nil {
		return count, fmt.Errorf("detach orphan loop devices under %s: %w", dir, err)
	}
	return count, nil
}

// backingFile returns the image behind loopN, false if it is unbound.
func backingFile(n int) (string, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/sys/block/loop%d/loop/backing_file", n))
	if err != nil {
		return "", false
	}
	// An image deleted while attached is still an orphan of ours.
	return strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), " (deleted)"), true
}

func autoclear(n int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/sys/block/loop%d/loop/autoclear", n))
	return err == nil && strings.TrimSpace(string(b)) == "1"
}

// devNumber returns loopN's "major:minor" as mountinfo prints it.
func devNumber(n int) string {
	b, err := os.ReadFile(fmt.Sprintf("/sys/block/loop%d/dev", n))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// detachUnmounted clears loopN unless it is mounted in some namespace,
// which the O_EXCL open detects (a mounted block device refuses it).
func detachUnmounted(path string, n int) (bool, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_EXCL|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		// Static /dev without this node: let openLoop create it.
		if fd, err = openLoop(path, n); err == nil {
			unix.Close(fd)
			fd, err = unix.Open(path, unix.O_RDONLY|unix.O_EXCL|unix.O_CLOEXEC, 0)
		}
	}
	if errors.Is(err, unix.EBUSY) || errors.Is(err, unix.ENXIO) {
		return false, nil // mounted elsewhere, or gone meanwhile
	}
	if err != nil {
		return false, fmt.Errorf("open %s: %w", path, err)
	}
	defer unix.Close(fd) // last close is when the kernel actually detaches
	err = unix.IoctlSetInt(fd, unix.LOOP_CLR_FD, 0)
	if errors.Is(err, unix.ENXIO) {
		return false, nil // someone detached it first
	}
	if err != nil {
		return false, fmt.Errorf("detach %s: %w", path, err)
	}
	return true, nil
}

// mountedDevices returns the source and the major:minor of every mount in
// our mount namespace.
func mountedDevices() (map[string]bool, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	defer f.Close()
	m := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent major:minor root mountpoint opts [optional...] - fstype source superopts
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 {
			continue
		}
		m[fields[2]] = true
		for i, f := range fields {
			if f == "-" && i+2 < len(fields) {
				m[fields[i+2]] = true
				break
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	return m, nil
}

// AwaitReleased waits until no loop device is attached to image: its
// filesystem was unmounted and every write reached the image (the last
// process of a computer unmounts its workspace as it exits; the autoclear
// loop device then detaches). It gives up when ctx ends.
func AwaitReleased(ctx context.Context, image string) error {
	for {
		held := -1
		loops, _ := filepath.Glob("/sys/block/loop*")
		for _, l := range loops {
			n, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(l), "loop"))
			if err != nil {
				continue
			}
			if b, ok := backingFile(n); ok && b == image {
				held = n
				break
			}
		}
		if held < 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("/dev/loop%d still holds %s: %w", held, image, ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
}
