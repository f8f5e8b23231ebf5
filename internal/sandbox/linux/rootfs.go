package linux

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cubicle-sandbox/cubicle/internal/agent"
	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// runtimePaths are bound read-only from the host: the programs and
// libraries code in a computer may run. Merged-/usr hosts have symlinks for
// the top-level ones, which are reproduced as symlinks.
var runtimePaths = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// etcBinds are the host /etc entries a computer sees (read-only); nothing
// else of the host's /etc is visible. passwd, group, hosts, hostname,
// resolv.conf and nsswitch.conf are written fresh.
var etcBinds = []string{
	"ssl", "ca-certificates", "ca-certificates.conf", "alternatives",
	"ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone",
	"mime.types", "protocols", "services", "rpc", "gai.conf", "inputrc",
	"python3", "python3.11", "matplotlibrc", "fonts", "bash.bashrc",
	"profile", "debian_version", "os-release", "magic", "mailcap",
}

// maskedFiles and maskedDirs hide host kernel information in /proc, as runc
// does; readonlyProc are visible but never writable.
var (
	maskedFiles = []string{"kcore", "keys", "latency_stats", "timer_list", "timer_stats",
		"sched_debug", "sysrq-trigger", "kallsyms", "kmsg", "config.gz"}
	maskedDirs   = []string{"acpi", "asound", "scsi", "firmware", "driver"}
	readonlyProc = []string{"bus", "fs", "irq", "sys"}
)

// devices are made in the computer's /dev like the host's (makeDevices, on
// the host).
var devices = []string{"null", "zero", "full", "random", "urandom", "tty"}

const roBind = unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV

// buildRoot assembles the computer's root filesystem under init.RootDir:
// a small tmpfs the host's runtime is bound into, or a template's image
// (init.RootImage). It runs as PID 1 in the new mount namespace, before
// pivot_root; what only the host can mount arrives as descriptors
// (init.Host).
func buildRoot(init protocol.Init) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	root := init.RootDir
	etc := bindHost
	if init.RootImage {
		if err := attach(init.Host.Runtime, root); err != nil {
			return fmt.Errorf("the template's root: %w", err)
		}
		etc = imageEtc
	} else if err := unix.Mount("tmpfs", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=4m,mode=755"); err != nil {
		return fmt.Errorf("mount root tmpfs: %w", err)
	}
	// Extra mounts come later (bindExtra, after pivot_root).
	steps := []func(string, protocol.Init) error{mountDev, etc, mountWorkspace, mountTmp, mountProc}
	for _, step := range steps {
		if err := step(root, init); err != nil {
			return err
		}
	}
	return nil
}

// mountDir makes the directory dst to mount on, or, on a template's
// read-only root, checks that the image has it (a directory, not a link).
func mountDir(dst string, mode os.FileMode) error {
	err := os.Mkdir(dst, mode)
	if !errors.Is(err, os.ErrExist) {
		return err
	}
	if fi, err := os.Lstat(dst); err != nil || !fi.IsDir() {
		return fmt.Errorf("mount point %s is not a directory", dst)
	}
	return nil
}

// bindHost binds the runtime and the curated /etc entries from the host,
// through a neutral source mount when possible (neutral.go).
func bindHost(root string, init protocol.Init) error {
	rs, err := openRuntimeSource(root, init.Host.Runtime)
	if err != nil {
		return err
	}
	if err := bindRuntime(root, rs); err != nil {
		rs.close()
		return err
	}
	if err := writeEtc(root, init, rs); err != nil {
		rs.close()
		return err
	}
	return rs.close()
}

func bindRuntime(root string, rs *runtimeSource) error {
	for _, p := range runtimePaths {
		fi, err := os.Lstat(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("runtime path %s: %w", p, err)
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			if err != nil {
				return fmt.Errorf("runtime path %s: %w", p, err)
			}
			if err := os.Symlink(target, root+p); err != nil {
				return fmt.Errorf("runtime path %s: %w", p, err)
			}
			continue
		}
		if err := bindReadOnly(rs.source(p), root+p); err != nil {
			return err
		}
	}
	if _, err := os.Stat(root + "/bin/sh"); err != nil {
		return fmt.Errorf("the runtime has no /bin/sh: %w", err)
	}
	return nil
}

// bindReadOnly binds src (a file or directory) at dst, read-only, nosuid,
// nodev; dst is made first unless it exists.
func bindReadOnly(src, dst string) error {
	if _, err := os.Lstat(dst); err != nil {
		if err := mountPoint(src, dst); err != nil {
			return err
		}
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s: %w", src, err)
	}
	if err := unix.Mount("", dst, "", roBind, ""); err != nil {
		return fmt.Errorf("make %s read-only: %w", src, err)
	}
	return nil
}

// mountPoint creates dst as an empty file or directory, like src.
func mountPoint(src, dst string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("bind source %s: %w", src, err)
	}
	return makeMountPoint(fi.IsDir(), dst)
}

// makeMountPoint creates dst as an empty directory or file.
func makeMountPoint(dir bool, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if dir {
		if err := os.Mkdir(dst, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
		return nil
	}
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// etcFiles are the /etc files every computer gets fresh.
func etcFiles(init protocol.Init) map[string]string {
	return map[string]string{
		"passwd": "root:x:0:0:root:/root:/usr/sbin/nologin\n" +
			"user:x:1000:1000:sandbox user:/workspace:/bin/bash\n" +
			"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
		"group":         "root:x:0:\nuser:x:1000:\nnogroup:x:65534:\n",
		"hosts":         "127.0.0.1\tlocalhost " + init.Hostname + "\n::1\tlocalhost ip6-localhost ip6-loopback\n",
		"hostname":      init.Hostname + "\n",
		"resolv.conf":   resolvConf(init.Nameserver),
		"nsswitch.conf": "passwd: files\ngroup: files\nhosts: files dns\n",
	}
}

func writeEtc(root string, init protocol.Init, rs *runtimeSource) error {
	etc := root + "/etc"
	if err := os.Mkdir(etc, 0o755); err != nil {
		return err
	}
	for name, content := range etcFiles(init) {
		if err := os.WriteFile(filepath.Join(etc, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	for _, name := range etcBinds {
		src := "/etc/" + name
		if _, err := os.Stat(src); err != nil {
			continue // absent on this host, or a dangling link
		}
		if link, ok := runtimeLink(src); ok {
			if err := os.Symlink(link, filepath.Join(etc, name)); err != nil {
				return err
			}
			continue
		}
		if err := bindReadOnly(rs.source(src), filepath.Join(etc, name)); err != nil {
			return err
		}
	}
	return trustCA(root, etc, init.CACert)
}

// imageEtc gives a computer on a template's image its fresh /etc files
// (and its trust store with its own CA): written on a tmpfs of the moment
// next to the root, made read-only like the host template's root, and
// bound over the image's own (the image's /etc is the template's).
func imageEtc(root string, init protocol.Init) error {
	scratch := filepath.Join(filepath.Dir(root), etcDir)
	if err := os.Mkdir(scratch, 0o700); err != nil {
		return err
	}
	defer os.Remove(scratch)
	flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC)
	if err := unix.Mount("tmpfs", scratch, "tmpfs", flags, "size=1m,mode=755"); err != nil {
		return fmt.Errorf("mount the /etc files' tmpfs: %w", err)
	}
	defer unix.Unmount(scratch, unix.MNT_DETACH) // the binds stay
	binds := map[string]string{}
	for name, content := range etcFiles(init) {
		src := filepath.Join(scratch, name)
		if err := os.WriteFile(src, []byte(content), 0o644); err != nil {
			return err
		}
		binds[root+"/etc/"+name] = src
	}
	bundle, err := caBundle(root, scratch, init.CACert)
	if err != nil {
		return err
	}
	if bundle != "" {
		binds[root+sandbox.CABundleFile] = bundle
	}
	if err := unix.Mount("", scratch, "", unix.MS_REMOUNT|unix.MS_RDONLY|flags, ""); err != nil {
		return fmt.Errorf("make the /etc files read-only: %w", err)
	}
	for dst, src := range binds {
		if err := bindFile(src, dst); err != nil {
			return err
		}
	}
	return nil
}

// bindFile binds the file src over dst, read-only: dst must be a regular
// file (on a template's image, not a link out of it).
func bindFile(src, dst string) error {
	if fi, err := os.Lstat(dst); err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("mount point %s is not a regular file", dst)
	}
	return bindReadOnly(src, dst)
}

// trustCA adds the computer's own CA (PEM, "" for none) to its system
// trust store on the root tmpfs (caBundle in /etc, bound over the
// bundle's place). (It stays: an unlinked file the bind still holds
// would keep the root from being made read-only.)
func trustCA(root, etc, pem string) error {
	bundle, err := caBundle(root, etc, pem)
	if err != nil || bundle == "" {
		return err
	}
	return bindFile(bundle, root+sandbox.CABundleFile)
}

// caBundle writes the computer's trust store with its own CA (PEM, ""
// for none: nothing is written) to ca-certificates.crt in dir: the
// runtime's bundle plus the CA. It returns the file's path.
func caBundle(root, dir, pem string) (string, error) {
	if pem == "" {
		return "", nil
	}
	dst := root + sandbox.CABundleFile
	if fi, err := os.Lstat(dst); err == nil && !fi.Mode().IsRegular() {
		return "", fmt.Errorf("the computer's CA: the trust store %s is not a regular file", sandbox.CABundleFile)
	}
	host, err := os.ReadFile(dst)
	if err != nil {
		return "", fmt.Errorf("the computer's CA: no trust store at %s to add it to: %w", sandbox.CABundleFile, err)
	}
	bundle := filepath.Join(dir, "ca-certificates.crt")
	if err := os.WriteFile(bundle, append(append(host, '\n'), pem...), 0o644); err != nil {
		return "", err
	}
	return bundle, nil
}

// runtimeLink returns the target of src when src is a symlink into the
// runtime (/etc/localtime -> /usr/share/zoneinfo/...): the computer gets
// the same symlink rather than a bind of the file, whose mountinfo root
// would name a host path different from its mount point.
func runtimeLink(src string) (string, bool) {
	link, err := os.Readlink(src)
	if err != nil {
		return "", false
	}
	resolved, err := filepath.EvalSymlinks(src)
	if err != nil {
		return "", false
	}
	for _, p := range runtimePaths {
		if strings.HasPrefix(resolved, p+"/") {
			return link, true
		}
	}
	return "", false
}

// mountWorkspace attaches the workspace disk the host mounted.
func mountWorkspace(root string, init protocol.Init) error {
	ws := root + agent.WorkspacePath
	if err := mountDir(ws, 0o755); err != nil {
		return err
	}
	if err := attach(init.Host.Workspace, ws); err != nil {
		return fmt.Errorf("workspace disk: %w", err)
	}
	return nil
}

// attach attaches the detached mount fd at dst and closes fd.
func attach(fd int, dst string) error {
	if fd <= controlFD {
		return fmt.Errorf("attach %s: no descriptor", dst)
	}
	defer unix.Close(fd)
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, dst, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("attach %s: %w", dst, err)
	}
	return nil
}

func mountTmp(root string, init protocol.Init) error {
	tmp := root + "/tmp"
	if err := mountDir(tmp, 0o755); err != nil {
		return err
	}
	data := fmt.Sprintf("size=%d,mode=1777,nr_inodes=%d", init.TmpBytes, 64<<10)
	if err := unix.Mount("tmpfs", tmp, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, data); err != nil {
		return fmt.Errorf("mount /tmp: %w", err)
	}
	return nil
}

// mountProc mounts the computer's /proc; masked files are covered with the
// computer's own /dev/null (mountDev runs first).
func mountProc(root string, _ protocol.Init) error {
	proc := root + "/proc"
	if err := mountDir(proc, 0o555); err != nil {
		return err
	}
	flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC)
	if err := unix.Mount("proc", proc, "proc", flags, "hidepid=invisible"); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	for _, name := range maskedFiles {
		p := proc + "/" + name
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		if err := unix.Mount(root+"/dev/null", p, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("mask /proc/%s: %w", name, err)
		}
	}
	for _, name := range maskedDirs {
		p := proc + "/" + name
		if fi, err := os.Lstat(p); err != nil || !fi.IsDir() {
			continue
		}
		if err := unix.Mount("tmpfs", p, "tmpfs", unix.MS_RDONLY|flags, "size=0"); err != nil {
			return fmt.Errorf("mask /proc/%s: %w", name, err)
		}
	}
	for _, name := range readonlyProc {
		p := proc + "/" + name
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		if err := unix.Mount(p, p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind /proc/%s: %w", name, err)
		}
		if err := unix.Mount("", p, "", roBind|unix.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("make /proc/%s read-only: %w", name, err)
		}
	}
	return nil
}

// mountDev attaches the /dev the host made (its device nodes, links and
// mount points) and mounts the computer's own devpts and /dev/shm in it.
func mountDev(root string, init protocol.Init) error {
	dev := root + "/dev"
	if err := mountDir(dev, 0o755); err != nil {
		return err
	}
	if err := attach(init.Host.Dev, dev); err != nil {
		return fmt.Errorf("/dev: %w", err)
	}
	if err := unix.Mount("devpts", dev+"/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC,
		"newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return fmt.Errorf("mount /dev/pts: %w", err)
	}
	shm := fmt.Sprintf("size=%d,mode=1777", init.ShmBytes)
	if err := unix.Mount("shm", dev+"/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, shm); err != nil {
		return fmt.Errorf("mount /dev/shm: %w", err)
	}
	return nil
}

// bindExtra attaches the mounts the host resolved and prepared (see
// openMounts; the host idmapped them to the computer's user namespace)
// from their descriptors; no source path is looked up here.
func bindExtra(root string, init protocol.Init) error {
	for _, m := range init.Mounts {
		if strings.Contains(m.Target, "..") {
			return fmt.Errorf("mount target %q must not contain ..", m.Target)
		}
		var st unix.Stat_t
		if m.FD <= controlFD || unix.Fstat(m.FD, &st) != nil {
			return fmt.Errorf("mount %s: no descriptor", m.Target)
		}
		dst := root + filepath.Clean(m.Target)
		if err := makeMountPoint(st.Mode&unix.S_IFMT == unix.S_IFDIR, dst); err != nil {
			return err
		}
		if err := attach(m.FD, dst); err != nil {
			return fmt.Errorf("mount %s: %w", m.Target, err)
		}
	}
	return nil
}

// pivot makes root the computer's / and drops every host mount.
func pivot(root string) error {
	if err := unix.Chdir(root); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach old root: %w", err)
	}
	return unix.Chdir("/")
}

// rootReadOnly makes the computer's / read-only once everything is mounted.
// The kernel refuses (EBUSY) while an inode removed from it is still being
// released, which the detach of the old root can delay under load (an RCU
// grace period): that is retried for a while, anything else is not.
func rootReadOnly() error {
	var err error
	for range 100 {
		err = unix.Mount("", "/", "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, "")
		if err != unix.EBUSY {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("make / read-only: %w", err)
	}
	return nil
}

// resolvConf is the computer's /etc/resolv.conf: its one nameserver, or a
// note that it has no network.
func resolvConf(nameserver string) string {
	if nameserver == "" {
		return "# This computer has no network.\n"
	}
	return "nameserver " + nameserver + "\noptions attempts:2 timeout:2\n"
}
