package linux

import (
	"context"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox/linux/disk"
)

// rootImages are the template images (sandbox.Root) computers use: each
// is attached once to a read-only loop device and mounted once, detached,
// under the neutral name "runtime" (neutral.go); every computer of the
// template gets a clone of that mount (open_tree), so a computer's start
// costs no loop device, no filesystem mount and no copy. An image stays
// attached while its file exists, also with no computer using it (the
// next computer then pays nothing); once the file is removed (the
// template's root collected) and no computer uses it, its mount is closed
// and the loop device frees itself (autoclear).
type rootImages struct {
	mu   sync.Mutex
	held map[string]*heldImage // by the image's path
}

// heldImage is one attached, mounted image.
type heldImage struct {
	file  *os.File // the image, to see it replaced or removed
	mount *os.File // the detached erofs mount, named "runtime"
	users int
}

// stale reports whether the image's file was removed or replaced since h
// was made.
func (h *heldImage) stale(path string) bool {
	var held, now unix.Stat_t
	if unix.Fstat(int(h.file.Fd()), &held) != nil || held.Nlink == 0 {
		return true
	}
	return unix.Stat(path, &now) != nil || now.Dev != held.Dev || now.Ino != held.Ino
}

func (h *heldImage) close() {
	h.mount.Close()
	h.file.Close()
}

// clone returns a detached mount of the image for one computer (the
// caller closes it once the agent has it) and the release to call when
// the computer is gone.
func (r *rootImages) clone(ctx context.Context, path string) (*os.File, func(), error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held == nil {
		r.held = map[string]*heldImage{}
	}
	r.pruneLocked()
	h := r.held[path]
	if h == nil {
		var err error
		if h, err = holdImage(ctx, path); err != nil {
			return nil, nil, err
		}
		r.held[path] = h
	}
	fd, err := unix.OpenTree(int(h.mount.Fd()), "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
	if err != nil {
		return nil, nil, fmt.Errorf("template image %s: clone its mount: %w", path, err)
	}
	h.users++
	var once sync.Once
	release := func() {
		once.Do(func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			h.users--
			r.pruneLocked()
		})
	}
	return os.NewFile(uintptr(fd), "runtime"), release, nil
}

// pruneLocked lets go of the images no computer uses whose file is gone
// or was replaced.
func (r *rootImages) pruneLocked() {
	for path, h := range r.held {
		if h.users == 0 && h.stale(path) {
			h.close()
			delete(r.held, path)
		}
	}
}

// holdImage attaches the EROFS image at path to a read-only loop device and
// mounts it detached, read-only, nosuid and nodev, under the name
// "runtime": the name is looked up through a node made for the moment in a
// scratch tmpfs, on a thread of its own (onPrivateThread).
func holdImage(ctx context.Context, path string) (*heldImage, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("template image: %w", err)
	}
	loop, err := disk.Attach(ctx, path, true)
	if err != nil {
		file.Close()
		return nil, fmt.Errorf("template image %s: %w", path, err)
	}
	defer loop.Close() // the mount holds the device from now on
	var st unix.Stat_t
	if err := unix.Stat(loop.Path, &st); err != nil {
		loop.Detach()
		file.Close()
		return nil, err
	}
	var mount *os.File
	err = onPrivateThread(func() error {
		scratch, err := fsMount("tmpfs", "tmpfs", []string{"size", "4k", "mode", "700"}, nil, 0)
		if err != nil {
			return err
		}
		defer scratch.Close()
		mount, err = mountNamed(scratch, "runtime", st.Rdev, "erofs", nil, []string{"ro"},
			unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
		return err
	})
	if err != nil {
		loop.Detach()
		file.Close()
		return nil, fmt.Errorf("template image %s: mount: %w", path, err)
	}
	return &heldImage{file: file, mount: mount}, nil
}
