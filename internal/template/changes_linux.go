package template

import (
	"archive/tar"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// maxChangesDepth bounds how deep a run step's changes may nest.
const maxChangesDepth = 256

// writeChangesTar writes a run step's changes, the upper layer of its
// build computer's overlay (dir), as a layer tar to out and returns how
// many entries it wrote. The tree is the step's (untrusted) but no longer
// changes (its computer was killed): it is walked with *at calls beneath
// dir, never following a link. overlayfs whiteouts (character devices
// 0/0) become ".wh." entries and opaque directories (trusted.overlay.opaque
// "y") a ".wh..wh..opq" entry; uid and gid userUID become 1000 (the
// computer's user); a name starting with ".wh." is refused. The unpack
// of the tar applies the rules every layer gets (setuid bits stripped,
// devices and FIFOs skipped, limits).
func writeChangesTar(dir *os.File, userUID uint32, out string, limits Limits) (int64, error) {
	f, err := os.Create(out)
	if err != nil {
		return 0, err
	}
	w := &changesWriter{tw: tar.NewWriter(f), userUID: userUID, limits: limits, links: map[[2]uint64]string{}}
	err = w.dir(dir, "", 0)
	if err == nil {
		err = w.tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return w.entries, err
}

type changesWriter struct {
	tw             *tar.Writer
	userUID        uint32
	limits         Limits
	entries, bytes int64
	links          map[[2]uint64]string // hard-linked files written, by device and inode
}

// dir writes the entries of the directory d, named rel in the tar.
func (w *changesWriter) dir(d *os.File, rel string, depth int) error {
	if depth > maxChangesDepth {
		return errf(ErrLimit, "%s: more than %d directories deep", rel, maxChangesDepth)
	}
	names, err := d.Readdirnames(-1)
	if err != nil {
		return err
	}
	slices.Sort(names)
	fd := int(d.Fd())
	for _, name := range names {
		if err := w.entry(fd, rel, name, depth); err != nil {
			return err
		}
	}
	return nil
}

func (w *changesWriter) entry(dirfd int, rel, name string, depth int) error {
	full := path.Join(rel, name)
	if strings.HasPrefix(name, ".wh.") {
		return errf(ErrInvalid, "%q: names starting with .wh. mean deletions in a layer; a run step cannot make them", "/"+full)
	}
	if w.entries++; w.entries > w.limits.MaxFiles {
		return errf(ErrLimit, "the step changed more than template.max_files (%d) entries", w.limits.MaxFiles)
	}
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("%s: %w", full, err)
	}
	hdr := &tar.Header{Name: full, Mode: int64(st.Mode & 0o7777), Uid: w.id(st.Uid), Gid: w.id(st.Gid),
		ModTime: time.Unix(st.Mtim.Unix()), Format: tar.FormatPAX}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFCHR:
		if st.Rdev == 0 { // an overlayfs whiteout
			return w.tw.WriteHeader(&tar.Header{Name: path.Join(rel, ".wh."+name), Typeflag: tar.TypeReg, Mode: 0o600, Format: tar.FormatPAX})
		}
		hdr.Typeflag, hdr.Devmajor, hdr.Devminor = tar.TypeChar, int64(unix.Major(st.Rdev)), int64(unix.Minor(st.Rdev))
	case unix.S_IFBLK:
		hdr.Typeflag, hdr.Devmajor, hdr.Devminor = tar.TypeBlock, int64(unix.Major(st.Rdev)), int64(unix.Minor(st.Rdev))
	case unix.S_IFIFO:
		hdr.Typeflag = tar.TypeFifo
	case unix.S_IFSOCK:
		w.entries--
		return nil // a socket is no file content; tar cannot say it
	case unix.S_IFLNK:
		target, err := readlinkat(dirfd, name)
		if err != nil {
			return fmt.Errorf("%s: %w", full, err)
		}
		hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, target
	case unix.S_IFDIR:
		return w.subdir(dirfd, name, full, hdr, depth)
	case unix.S_IFREG:
		return w.file(dirfd, name, hdr, &st)
	default:
		return errf(ErrInvalid, "%s: a file of type %o", full, st.Mode&unix.S_IFMT)
	}
	return w.tw.WriteHeader(hdr)
}

// id maps an owner of the upper layer to the layer's: the computer's
// host uid is its user, 1000.
func (w *changesWriter) id(id uint32) int {
	if id == w.userUID {
		return 1000
	}
	return int(id)
}

func (w *changesWriter) subdir(dirfd int, name, full string, hdr *tar.Header, depth int) error {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%s: %w", full, err)
	}
	d := os.NewFile(uintptr(fd), full)
	defer d.Close()
	hdr.Typeflag, hdr.Name = tar.TypeDir, full+"/"
	if err := w.tw.WriteHeader(hdr); err != nil {
		return err
	}
	buf := make([]byte, 8)
	if n, err := unix.Fgetxattr(fd, "trusted.overlay.opaque", buf); err == nil && string(buf[:n]) == "y" {
		if err := w.tw.WriteHeader(&tar.Header{Name: full + "/.wh..wh..opq", Typeflag: tar.TypeReg, Mode: 0o600, Format: tar.FormatPAX}); err != nil {
			return err
		}
	}
	return w.dir(d, full, depth+1)
}

func (w *changesWriter) file(dirfd int, name string, hdr *tar.Header, st *unix.Stat_t) error {
	key := [2]uint64{st.Dev, st.Ino}
	if first, ok := w.links[key]; ok {
		hdr.Typeflag, hdr.Linkname = tar.TypeLink, first
		return w.tw.WriteHeader(hdr)
	}
	if st.Nlink > 1 {
		w.links[key] = hdr.Name
	}
	if w.bytes += st.Size; w.bytes > w.limits.MaxBytes {
		return errf(ErrLimit, "the step wrote more than template.max_bytes (%d bytes)", w.limits.MaxBytes)
	}
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NOCTTY|unix.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("%s: %w", hdr.Name, err)
	}
	in := os.NewFile(uintptr(fd), hdr.Name)
	defer in.Close()
	hdr.Typeflag, hdr.Size = tar.TypeReg, st.Size
	if err := w.tw.WriteHeader(hdr); err != nil {
		return err
	}
	if _, err := io.CopyN(w.tw, in, st.Size); err != nil {
		return fmt.Errorf("%s: %w", hdr.Name, err)
	}
	return nil
}

// readlinkat reads a symbolic link's target.
func readlinkat(dirfd int, name string) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(dirfd, name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}
