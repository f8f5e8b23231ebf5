package linux

import (
	"fmt"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// openMounts resolves every extra mount of spec once, on the host, before
// the agent starts. Each becomes a detached copy of the mount tree found
// there (open_tree OPEN_TREE_CLONE), passed to the agent as descriptor
// firstFD, firstFD+1, ... and attached with move_mount: nothing looks a
// path up again, so a tenant who swaps a directory for a symlink after the
// check redirects nothing. (A plain O_PATH descriptor would not do: a bind
// mount from a mount of another mount namespace is refused.) The caller
// closes the files once the agent started.
func openMounts(spec sandbox.Spec, firstFD int) ([]*os.File, []protocol.Mount, error) {
	var files []*os.File
	var mounts []protocol.Mount
	for _, m := range spec.Mounts {
		f, err := openMount(m)
		if err != nil {
			closeAll(files)
			return nil, nil, err
		}
		files = append(files, f)
		mounts = append(mounts, protocol.Mount{Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly,
			FD: firstFD + len(files) - 1})
	}
	return files, mounts, nil
}

// openMount returns a detached, recursive copy of the tree at m's source,
// already nosuid, nodev and (when asked) read-only throughout.
func openMount(m sandbox.Mount) (*os.File, error) {
	fd, err := resolveSource(m)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	tree, err := unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE|unix.AT_EMPTY_PATH)
	if err != nil {
		return nil, fmt.Errorf("clone mount source %s: %w", m.Source, err)
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if m.ReadOnly {
		attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
	}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &attr); err != nil {
		unix.Close(tree)
		return nil, fmt.Errorf("set mount attributes of %s: %w", m.Source, err)
	}
	return os.NewFile(uintptr(tree), "mount"), nil
}

// resolveSource opens m's source as an O_PATH descriptor. An operator's
// source (no Root) is opened as named; a source beneath a Root is reached
// from Root one component at a time, refusing symlinks, magic links and
// "..", and must be a directory.
func resolveSource(m sandbox.Mount) (int, error) {
	if m.Root == "" {
		fd, err := unix.Open(m.Source, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, fmt.Errorf("mount source %s: %w", m.Source, err)
		}
		return fd, nil
	}
	root := path.Clean(m.Root)
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("%w: open root %s: %v", sandbox.ErrMountSource, root, err)
	}
	defer unix.Close(rfd)
	rel := strings.TrimPrefix(strings.TrimPrefix(m.Source, root), "/")
	if rel == "" {
		rel = "."
	}
	fd, err := unix.Openat2(rfd, rel, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return -1, fmt.Errorf("%w: %s: %v", sandbox.ErrMountSource, m.Source, err)
	}
	return fd, nil
}

// idmapMounts idmaps detached mounts to the user namespace of the
// computer whose agent is pid, so that on-disk uid 1000 is the sandbox user
// inside (the computer's own uid on the host) and root stays root: the
// computer's workspace disk and template image (required: an error when
// they cannot be idmapped), and its extra bind mounts (binds: a filesystem
// that cannot be idmapped is attached as it is, owned as on the host).
// A workspace so owned by uid 1000 on disk keeps its owner when another
// computer, with another host uid, mounts it (a resumed one).
func idmapMounts(pid int, required, binds []*os.File) error {
	if len(required)+len(binds) == 0 {
		return nil
	}
	userns, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", pid))
	if err != nil {
		return fmt.Errorf("open the computer's user namespace: %w", err)
	}
	defer userns.Close()
	idmap := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(userns.Fd())}
	for _, f := range required {
		if err := unix.MountSetattr(int(f.Fd()), "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &idmap); err != nil {
			return fmt.Errorf("idmap the computer's %s mount: %w", f.Name(), err)
		}
	}
	for _, f := range binds {
		unix.MountSetattr(int(f.Fd()), "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &idmap)
	}
	return nil
}
