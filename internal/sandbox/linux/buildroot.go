package linux

import (
	"context"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/cubicle-sandbox/cubicle/internal/agent"
)

// A template build's computer (sandbox.Root.Build) has a writable root: an
// overlay the host mounts over the template's image (not idmapped: on-disk
// ids are host ids, and the computer's user namespace maps root to root),
// whose upper and work directories are on the computer's own workspace
// disk, so what a run step writes counts against its disk limit. The
// disk's root holds
//
//	upper/      the overlay's upper layer (the step's changes), root's, 0755
//	work/       the overlay's work directory, root's, 0700
//	workspace/  the computer's /workspace, the sandbox user's
//
// The host keeps a descriptor of upper/ (computer.upper), read after Kill
// (RootChanges). The overlay is mounted nosuid and nodev, with
// redirect_dir, metacopy and index off, so its upper layer is plain files
// and whiteouts that a layer tar can say.

// buildDirs are made on a build computer's workspace disk.
var buildDirs = []struct {
	name string
	mode uint32
}{{"upper", 0o755}, {"work", 0o700}, {"workspace", 0o755}}

// makeBuildRoot turns m into a build computer's mounts: m.runtime (the
// image's mount) becomes the overlay over it, m.workspace the clone of the
// disk's workspace/ directory, and m.upper is the upper layer's directory.
// It runs on a private thread, after m.make.
func (m *hostMounts) makeBuildRoot() error {
	disk := int(m.workspace.Fd())
	for _, d := range buildDirs {
		if err := unix.Mkdirat(disk, d.name, d.mode); err != nil {
			return fmt.Errorf("build disk: %s: %w", d.name, err)
		}
		if err := unix.Fchmodat(disk, d.name, d.mode, 0); err != nil { // not the umask's
			return err
		}
	}
	if err := unix.Fchownat(disk, "workspace", agent.SandboxUID, agent.SandboxGID, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	ufd, err := unix.Openat(disk, "upper", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	m.upper = os.NewFile(uintptr(ufd), "upper")
	opts := []string{
		"lowerdir", fmt.Sprintf("/proc/self/fd/%d", m.runtime.Fd()),
		"upperdir", fmt.Sprintf("/proc/self/fd/%d/upper", disk),
		"workdir", fmt.Sprintf("/proc/self/fd/%d/work", disk),
		"redirect_dir", "off", "metacopy", "off", "index", "off",
	}
	overlay, err := fsMount("overlay", "build", opts, nil, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return fmt.Errorf("build root overlay: %w", err)
	}
	wfd, err := unix.OpenTree(disk, "workspace", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		overlay.Close()
		return fmt.Errorf("build workspace: %w", err)
	}
	m.runtime.Close()
	m.workspace.Close()
	m.runtime, m.workspace = overlay, os.NewFile(uintptr(wfd), "workspace")
	return nil
}

var errNotKilled = errors.New("the build computer's root changes are read after Kill")

// RootChanges returns a descriptor of the upper layer of a build
// computer's root, once Kill returned (sandbox.RootChanges) and the agent
// was reaped: the kernel reaps a PID namespace's first process only once
// every task of the namespace is gone, so no write of the computer (an
// asynchronous one included) can still land while the caller reads.
func (c *computer) RootChanges(ctx context.Context) (*os.File, uint32, error) {
	c.teardownMu.Lock()
	defer c.teardownMu.Unlock()
	if c.upper == nil || c.tornDown {
		return nil, 0, fmt.Errorf("computer %s: no build root (sandbox.Root.Build) or already destroyed", c.id)
	}
	if !c.killed {
		return nil, 0, errNotKilled
	}
	select {
	case <-c.done:
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
	fd, err := unix.FcntlInt(c.upper.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, 0, err
	}
	return os.NewFile(uintptr(fd), "upper"), c.uid.uid, nil
}
