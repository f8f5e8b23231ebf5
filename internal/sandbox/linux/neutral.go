package linux

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// The computer's /proc/self/mountinfo must show nothing of the host's
// layout (docs/ARCHITECTURE.md, "What mountinfo shows"). A mount's source
// name is fixed when the mount is made, and a bind copies it from the
// mount it binds, so the names are chosen on the host (hostmounts.go): the
// workspace disk and the host filesystem the runtime is bound from are
// mounted by a relative name ("workspace", "runtime") through a block node
// made for the moment in the computer's own /dev, and the device nodes are
// made, not bound.

// mountNamed mounts the block device rdev under the neutral source name
// name, through a node of that name made for the moment in dev. The name
// is looked up from the working directory, which it sets to dev: it runs
// on a thread of its own (onPrivateThread).
func mountNamed(dev *os.File, name string, rdev uint64, fstype string, opts, flags []string, attr int) (*os.File, error) {
	if err := unix.Fchdir(int(dev.Fd())); err != nil {
		return nil, err
	}
	if err := unix.Mknodat(int(dev.Fd()), name, unix.S_IFBLK|0o600, int(rdev)); err != nil {
		return nil, fmt.Errorf("make %s node: %w", name, err)
	}
	defer unix.Unlinkat(int(dev.Fd()), name, 0)
	m, err := fsMount(fstype, name, opts, flags, attr)
	if err != nil {
		return nil, fmt.Errorf("mount %s: %w", name, err)
	}
	return m, nil
}

// mountRuntime mounts the host's root filesystem a second time, named
// "runtime", when it is a block-device filesystem mounted whole at /; nil
// otherwise (the agent then binds the runtime from the host's paths).
func mountRuntime(dev *os.File) *os.File {
	fstype, ok := rootFSType()
	var st unix.Stat_t
	if !ok || unix.Stat("/", &st) != nil || unix.Major(st.Dev) == 0 {
		return nil
	}
	attr := unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV
	m, err := mountNamed(dev, "runtime", st.Dev, fstype, nil, nil, attr)
	if err != nil {
		// A read-only host root refuses a read-write mount of its device.
		m, err = mountNamed(dev, "runtime", st.Dev, fstype, nil, []string{"ro"}, attr)
	}
	if err != nil {
		return nil
	}
	return m
}

// runtimeSource is the host's mount named "runtime", attached in the
// agent, that runtime paths are bound from. It is detached (its binds
// stay) once the root is built.
type runtimeSource struct {
	dir string // "" without one: bind from the host paths
	dev uint64
}

// openRuntimeSource attaches the runtime mount the host made (descriptor
// fd, 0 for none) next to root: in the computer's host directory, never
// on the computer's own root (a mountpoint removed there right after its
// lazy unmount can keep the root tmpfs busy, and making it read-only then
// fails with EBUSY).
func openRuntimeSource(root string, fd int) (*runtimeSource, error) {
	if fd == 0 {
		return &runtimeSource{}, nil
	}
	dir := filepath.Join(filepath.Dir(root), runtimeDir)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, err
	}
	if err := attach(fd, dir); err != nil {
		os.Remove(dir)
		return nil, fmt.Errorf("runtime source: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return nil, err
	}
	return &runtimeSource{dir: dir, dev: st.Dev}, nil
}

// source is where to bind the host path p from: the same file in the
// neutral mount when p is on the host's root filesystem (same device and
// inode there), else p itself.
func (r *runtimeSource) source(p string) string {
	if r.dir == "" {
		return p
	}
	var host, mine unix.Stat_t
	if unix.Stat(p, &host) != nil || unix.Stat(r.dir+p, &mine) != nil ||
		host.Dev != r.dev || mine.Dev != host.Dev || mine.Ino != host.Ino {
		return p
	}
	return r.dir + p
}

// close detaches the neutral mount; the binds made from it remain.
func (r *runtimeSource) close() error {
	if r.dir == "" {
		return nil
	}
	if err := unix.Unmount(r.dir, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach the runtime source: %w", err)
	}
	return os.Remove(r.dir)
}

// rootFSType returns the type of the filesystem mounted at / when it is
// mounted whole (mountinfo root "/") from a device.
func rootFSType() (string, bool) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", false
	}
	defer f.Close()
	fstype, ok := "", false
	sc := bufio.NewScanner(f)
	for sc.Scan() { // the last mount at / is the one on top
		pre, post, found := strings.Cut(sc.Text(), " - ")
		fields, after := strings.Fields(pre), strings.Fields(post)
		if !found || len(fields) < 5 || len(after) < 2 || fields[4] != "/" {
			continue
		}
		fstype, ok = after[0], fields[3] == "/" && strings.HasPrefix(after[1], "/dev/")
	}
	return fstype, ok
}
