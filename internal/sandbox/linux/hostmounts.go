package linux

import (
	"fmt"
	"os"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/cubicle-sandbox/cubicle/internal/agent"
	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
)

// hostMounts are the mounts the host makes for a computer before its agent
// starts: the agent lives in the computer's user namespace from its first
// instruction, where a block filesystem cannot be mounted and a device
// node cannot be made. Each is a detached mount (fsmount) passed to the
// agent as a descriptor and attached there (move_mount); one that never
// gets attached is gone when the last descriptor closes.
type hostMounts struct {
	dev, workspace, runtime *os.File // runtime is nil when the host's / is no block device
	image                   bool     // runtime is a template's image (the computer's whole root)
	build                   bool     // runtime is a build's overlay over the image (buildroot.go)
	upper                   *os.File // a build's upper layer, which the computer keeps
	volumes                 []*os.File
}

// idmapped are the mounts to idmap to the computer's user namespace: its
// workspace disk and, if it has one, its template image.
func (m *hostMounts) idmapped() []*os.File {
	out := append([]*os.File{m.workspace}, m.volumes...)
	if m.image && !m.build { // an overlay cannot be idmapped; the image under it is not either
		out = append(out, m.runtime)
	}
	return out
}

// files returns the descriptors to pass to the agent, and their numbers
// there when the first is passed as first.
func (m *hostMounts) files(first int) ([]*os.File, protocol.HostFDs) {
	files := []*os.File{m.dev, m.workspace}
	fds := protocol.HostFDs{Dev: first, Workspace: first + 1}
	if m.runtime != nil {
		files = append(files, m.runtime)
		fds.Runtime = first + 2
	}
	return files, fds
}

func (m *hostMounts) close() {
	for _, f := range append([]*os.File{m.dev, m.workspace, m.runtime, m.upper}, m.volumes...) {
		if f != nil {
			f.Close()
		}
	}
}

// makeHostMounts mounts the computer's /dev (a small tmpfs with the device
// nodes), its workspace disk (the block device disk, its root owned by
// uid 1000 on disk, idmapped later) and its runtime: root, a template's image (a clone of the mount
// rootImages holds, which hostMounts owns from now on), or without one, when
// the host's / is a block-device filesystem, a second mount of it named
// "runtime" (see neutral.go). The block filesystems are
// mounted by a relative name through a block node made for the moment in
// the new /dev, so their source is neutral; that lookup uses the calling
// thread's working directory, so it runs on a thread of its own
// (onPrivateThread).
func makeHostMounts(disk string, root *os.File, build bool, vols []volumeDevice) (*hostMounts, error) {
	m := &hostMounts{runtime: root, image: root != nil, build: build && root != nil}
	err := onPrivateThread(func() error {
		if err := m.make(disk, root, vols); err != nil || !m.build {
			return err
		}
		return m.makeBuildRoot()
	})
	if err != nil {
		m.close()
		return nil, err
	}
	return m, nil
}

func (m *hostMounts) make(disk string, root *os.File, vols []volumeDevice) error {
	dev, err := fsMount("tmpfs", "tmpfs", []string{"size", "64k", "mode", "755"}, nil,
		unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC)
	if err != nil {
		return fmt.Errorf("mount /dev: %w", err)
	}
	m.dev = dev
	var st unix.Stat_t
	if err := unix.Stat(disk, &st); err != nil {
		return fmt.Errorf("workspace disk %s: %w", disk, err)
	}
	if m.workspace, err = mountNamed(dev, "workspace", st.Rdev, "ext4", []string{"errors", "remount-ro"}, nil,
		unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV); err != nil {
		return fmt.Errorf("mount workspace disk %s: %w", disk, err)
	}
	if err := ownRoot(m.workspace); err != nil {
		return fmt.Errorf("workspace disk %s: %w", disk, err)
	}
	if !m.image {
		m.runtime = mountRuntime(dev)
	}
	for _, v := range vols {
		f, err := mountVolume(dev, v)
		if err != nil {
			return err
		}
		m.volumes = append(m.volumes, f)
	}
	return makeDevices(dev)
}

// onPrivateThread runs fn on one of a few OS threads that have a
// filesystem context (working directory, root) of their own, and live as
// long as the process: a change of directory there is seen by no other
// goroutine, and fn leaves the thread in "/" again. (A thread is never
// let to exit: a computer's agent started from it, back when it ran other
// goroutines, would get its parent-death signal.)
func onPrivateThread(fn func() error) error {
	privateOnce.Do(func() {
		for range privateThreads {
			go privateThread()
		}
	})
	j := privateJob{fn: fn, done: make(chan error, 1)}
	privateWork <- j
	return <-j.done
}

const privateThreads = 4

type privateJob struct {
	fn   func() error
	done chan error
}

var (
	privateOnce sync.Once
	privateWork = make(chan privateJob)
)

func privateThread() {
	runtime.LockOSThread() // never unlocked: this thread serves only here
	err := unix.Unshare(unix.CLONE_FS)
	if err != nil {
		err = fmt.Errorf("unshare a thread's filesystem context: %w", err)
	}
	for j := range privateWork {
		if err != nil {
			j.done <- err
			continue
		}
		j.done <- j.fn()
		unix.Chdir("/")
	}
}

// fsMount makes a detached mount of a new (or, for a block device already
// mounted, the existing) filesystem: opts are key, value pairs, flags
// are set without a value.
func fsMount(fstype, source string, opts, flags []string, attr int) (*os.File, error) {
	fs, err := unix.Fsopen(fstype, unix.FSOPEN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("open %s context: %w", fstype, err)
	}
	defer unix.Close(fs)
	if err := unix.FsconfigSetString(fs, "source", source); err != nil {
		return nil, err
	}
	for i := 0; i+1 < len(opts); i += 2 {
		if err := unix.FsconfigSetString(fs, opts[i], opts[i+1]); err != nil {
			return nil, fmt.Errorf("option %s: %w", opts[i], err)
		}
	}
	for _, f := range flags {
		if err := unix.FsconfigSetFlag(fs, f); err != nil {
			return nil, fmt.Errorf("option %s: %w", f, err)
		}
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return nil, err
	}
	fd, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, attr)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), source), nil
}

// ownRoot gives the root directory of the workspace mount m (not yet
// idmapped) to uid 1000 on disk, the sandbox user inside once idmapped,
// mode 0755, without lost+found.
func ownRoot(m *os.File) error {
	uid := agent.SandboxUID
	unix.Unlinkat(int(m.Fd()), "lost+found", unix.AT_REMOVEDIR)
	fd, err := unix.Openat(int(m.Fd()), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Fchown(fd, int(uid), int(uid)); err != nil {
		return err
	}
	return unix.Fchmod(fd, 0o755)
}

// makeDevices creates the computer's device nodes like the host's, the
// mount points of its devpts and /dev/shm, and the usual links.
func makeDevices(dev *os.File) error {
	dir := int(dev.Fd())
	for _, d := range devices {
		var st unix.Stat_t
		if err := unix.Stat("/dev/"+d, &st); err != nil {
			return fmt.Errorf("device /dev/%s: %w", d, err)
		}
		if err := unix.Mknodat(dir, d, unix.S_IFCHR|0o600, int(st.Rdev)); err != nil {
			return fmt.Errorf("make /dev/%s: %w", d, err)
		}
		if err := unix.Fchmodat(dir, d, st.Mode&0o777, 0); err != nil {
			return err
		}
	}
	for _, d := range []string{"pts", "shm"} {
		if err := unix.Mkdirat(dir, d, 0o755); err != nil {
			return err
		}
	}
	links := map[string]string{"ptmx": "pts/ptmx", "fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
		"stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2", "core": "/proc/kcore"}
	for name, target := range links {
		if err := unix.Symlinkat(target, dir, name); err != nil {
			return err
		}
	}
	return nil
}
