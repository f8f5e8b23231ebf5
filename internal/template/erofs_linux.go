package template

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// A computer's root is its template's image, read-only, so the image has
// the mount points a computer needs: the directories its own /dev, /proc,
// /tmp and /workspace are mounted on, and regular files where its fresh
// /etc files and its trust store (for a computer's own CA) are bound.
// They are made in the flattened root before the image is (prepareRoot):
// a missing one is created, a symbolic link or other non-directory where a
// directory belongs is replaced, and so is a link where a file belongs
// (/etc/resolv.conf is often a link to systemd's).
var (
	mountDirs  = []string{"dev", "proc", "tmp", "workspace"}
	mountFiles = []string{"etc/group", "etc/hostname", "etc/hosts", "etc/nsswitch.conf", "etc/passwd", "etc/resolv.conf"}
	trustStore = "etc/ssl/certs/ca-certificates.crt"
)

// makeImage prepares the root in dir/rootfs and writes dir/root.erofs.
func makeImage(ctx context.Context, dir string) error {
	return MakeImage(ctx, filepath.Join(dir, "rootfs"), filepath.Join(dir, imageFile))
}

// MakeImage makes the mount points a computer needs in the root directory
// rootfs (see mountDirs) and writes its EROFS image to img (through
// img.tmp, renamed when complete).
func MakeImage(ctx context.Context, rootfs, img string) error {
	if err := prepareRoot(rootfs); err != nil {
		return err
	}
	mkfs, err := exec.LookPath("mkfs.erofs")
	if err != nil {
		return fmt.Errorf("making the root's image needs mkfs.erofs: install erofs-utils (scripts/setup.sh does): %w", err)
	}
	tmp := img + ".tmp"
	os.Remove(tmp)
	var out bytes.Buffer
	// Modification times are kept (Python compares them with its .pyc
	// files); extended attributes are not (imports never write any).
	cmd := exec.CommandContext(ctx, mkfs, "--quiet", "--preserve-mtime", "-x-1", tmp, rootfs)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("mkfs.erofs: %w: %s", err, strings.TrimSpace(lastLines(out.String(), 5)))
	}
	if err := os.Rename(tmp, img); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// prepareRoot makes the mount points a computer needs in a flattened root
// (see mountDirs). Files are only ever added or replaced, never written:
// a root's files are hard links into its layers.
func prepareRoot(rootfs string) error {
	t, err := openTree(rootfs)
	if err != nil {
		return err
	}
	defer t.close()
	var st unix.Stat_t
	if err := unix.Fstatat(t.root, "etc", &st, unix.AT_SYMLINK_NOFOLLOW); err == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return errf(ErrUnsafe, "the image's /etc is not a directory; a computer needs one")
	}
	for _, d := range append([]string{"etc"}, mountDirs...) {
		if err := t.ensureDir(d); err != nil {
			return err
		}
	}
	for _, f := range mountFiles {
		if err := t.ensureFile(f, nil); err != nil {
			return err
		}
	}
	// The trust store, when the image has one as a link (into
	// /usr/share/…): a file with the same content, resolved inside the root.
	certs, err := t.openDir(path.Dir(trustStore))
	if err != nil {
		return nil // no /etc/ssl/certs: a computer with its own CA is refused at start
	}
	defer unix.Close(certs)
	if unix.Fstatat(certs, path.Base(trustStore), &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFLNK {
		return t.ensureFile(trustStore, nil)
	}
	content, err := readInRoot(t.root, trustStore)
	if err != nil {
		return err
	}
	return t.ensureFile(trustStore, content)
}

// ensureDir makes name a directory of the tree's root level, replacing a
// non-directory.
func (t *tree) ensureDir(name string) error {
	var st unix.Stat_t
	err := unix.Fstatat(t.root, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR:
		return nil
	case err == nil:
		if err := unix.Unlinkat(t.root, name, 0); err != nil {
			return fmt.Errorf("mount point /%s: %w", name, err)
		}
	case !errors.Is(err, unix.ENOENT):
		return fmt.Errorf("mount point /%s: %w", name, err)
	}
	if err := unix.Mkdirat(t.root, name, 0o755); err != nil {
		return fmt.Errorf("mount point /%s: %w", name, err)
	}
	return nil
}

// ensureFile makes name (in a directory of the root, which must be one,
// not a link) a regular file: one that is already regular is kept,
// anything else but a directory is replaced by a new file holding content.
func (t *tree) ensureFile(name string, content []byte) error {
	dir, err := t.openDir(path.Dir(name))
	if err != nil {
		return fmt.Errorf("mount point /%s: %w", name, err)
	}
	defer unix.Close(dir)
	base := path.Base(name)
	var st unix.Stat_t
	err = unix.Fstatat(dir, base, &st, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case err == nil && st.Mode&unix.S_IFMT == unix.S_IFREG:
		return nil
	case err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR:
		return fmt.Errorf("mount point /%s is a directory in the image; a computer needs a file there", name)
	case err == nil:
		if err := unix.Unlinkat(dir, base, 0); err != nil {
			return fmt.Errorf("mount point /%s: %w", name, err)
		}
	case !errors.Is(err, unix.ENOENT):
		return fmt.Errorf("mount point /%s: %w", name, err)
	}
	fd, err := unix.Openat(dir, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return fmt.Errorf("mount point /%s: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	_, err = f.Write(content)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// readInRoot reads the file name of the root rfd, following its links
// inside the root (RESOLVE_IN_ROOT); nil when there is none or it is no
// regular file.
func readInRoot(rfd int, name string) ([]byte, error) {
	fd, err := unix.Openat2(rfd, name, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NONBLOCK,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV})
	if err != nil {
		return nil, nil
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil, nil
	}
	return io.ReadAll(io.LimitReader(f, 64<<20))
}

// lastLines is the end of a command's output, for an error.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
