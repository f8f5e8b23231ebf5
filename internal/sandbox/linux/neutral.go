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
// mount it binds, so the names are chosen here: the workspace disk and the
// host filesystem the runtime is bound from are mounted by a relative
// name ("workspace", "runtime") through a block node made for the moment
// in the computer's own /dev, and the device nodes are made, not bound.

// mountNamed mounts the block device dev at target under the neutral
// source name name.
func mountNamed(root, name string, dev uint64, target, fstype string, flags uintptr, data string) error {
	dir := root + "/dev"
	node := filepath.Join(dir, name)
	if err := unix.Mknod(node, unix.S_IFBLK|0o600, int(dev)); err != nil {
		return fmt.Errorf("make %s node: %w", name, err)
	}
	defer os.Remove(node)
	if err := unix.Chdir(dir); err != nil {
		return err
	}
	defer unix.Chdir("/")
	if err := unix.Mount(name, target, fstype, flags, data); err != nil {
		return fmt.Errorf("mount %s: %w", name, err)
	}
	return nil
}

// runtimeSource is a second mount of the host's root filesystem, named
// "runtime", that runtime paths are bound from. It is unmounted (its binds
// stay) once the root is built.
type runtimeSource struct {
	dir string // "" when the host's / is not a block-device filesystem: bind from the host paths
	dev uint64
}

// openRuntimeSource mounts the host's root filesystem next to root (in the
// computer's host directory, never on the computer's own root: a
// mountpoint removed there right after its lazy unmount can keep the root
// tmpfs busy, and making it read-only then fails with EBUSY) when that is
// possible (a block device, mounted whole at /); otherwise it returns a
// source that binds from the host paths as they are.
func openRuntimeSource(root string) (*runtimeSource, error) {
	fstype, ok := rootFSType()
	var st unix.Stat_t
	if !ok || unix.Stat("/", &st) != nil || unix.Major(st.Dev) == 0 {
		return &runtimeSource{}, nil
	}
	dir := filepath.Join(filepath.Dir(root), runtimeDir)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, err
	}
	err := mountNamed(root, "runtime", st.Dev, dir, fstype, unix.MS_NOSUID|unix.MS_NODEV, "")
	if err != nil {
		// A read-only host root refuses a read-write mount of its device.
		err = mountNamed(root, "runtime", st.Dev, dir, fstype, unix.MS_NOSUID|unix.MS_NODEV|unix.MS_RDONLY, "")
	}
	if err != nil {
		os.Remove(dir)
		return &runtimeSource{}, nil
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

// makeDevices creates the computer's device nodes like the host's.
func makeDevices(dev string) error {
	for _, d := range devices {
		var st unix.Stat_t
		if err := unix.Stat("/dev/"+d, &st); err != nil {
			return fmt.Errorf("device /dev/%s: %w", d, err)
		}
		p := dev + "/" + d
		if err := unix.Mknod(p, unix.S_IFCHR|0o600, int(st.Rdev)); err != nil {
			return fmt.Errorf("make /dev/%s: %w", d, err)
		}
		if err := unix.Chmod(p, st.Mode&0o777); err != nil {
			return err
		}
	}
	return nil
}
