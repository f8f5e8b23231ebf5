package template

import (
	"errors"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// beneath resolves a path inside a tree without following any symbolic
// link, magic link or mount point.
const beneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// tree is a directory that this process alone fills: a layer being
// unpacked or a root being flattened (or, read only, a stored layer).
// Names are relative and clean ("a/b"; "." is the tree itself). Parent
// directories are opened with openat2(beneath), so a symbolic link in a
// parent is refused, never followed, and every entry is made with an *at
// call on its parent's descriptor.
type tree struct {
	dir      string
	root     int
	implicit map[string]bool      // directories made for a child, not listed
	dirTimes map[string]time.Time // set last, once their content is complete
	cached   string               // the last parent opened, kept open
	cachedFD int
}

// newTree makes dir (which must not exist) and opens it.
func newTree(dir string) (*tree, error) {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil { // whatever the umask
		return nil, err
	}
	return openTree(dir)
}

// openTree opens an existing tree.
func openTree(dir string) (*tree, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	return &tree{dir: dir, root: fd, implicit: map[string]bool{}, dirTimes: map[string]time.Time{}, cachedFD: -1}, nil
}

func (t *tree) close() {
	t.dropCache()
	unix.Close(t.root)
}

func (t *tree) dropCache() {
	if t.cachedFD >= 0 {
		unix.Close(t.cachedFD)
	}
	t.cached, t.cachedFD = "", -1
}

// openDir opens directory dir of the tree; the caller closes the result.
func (t *tree) openDir(dir string) (int, error) {
	if dir == "." {
		return unix.Dup(t.root)
	}
	fd, err := unix.Openat2(t.root, dir, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: beneath})
	if err != nil {
		return -1, dirErr(dir, err)
	}
	return fd, nil
}

// parent returns the (cached: not to be closed) descriptor of name's
// parent directory, making missing directories when create is set, and
// name's last element.
func (t *tree) parent(name string, create bool) (int, string, error) {
	dir, base := path.Dir(name), path.Base(name)
	if dir == "." {
		return t.root, base, nil
	}
	if dir == t.cached {
		return t.cachedFD, base, nil
	}
	fd, err := t.openDir(dir)
	if errors.Is(err, unix.ENOENT) && create {
		fd, err = t.mkdirAll(dir)
	}
	if err != nil {
		return -1, "", err
	}
	t.dropCache()
	t.cached, t.cachedFD = dir, fd
	return fd, base, nil
}

// mkdirAll makes dir and its missing parents (mode 0755, owned by root),
// remembered as implicit.
func (t *tree) mkdirAll(dir string) (int, error) {
	cur := t.root
	parts := strings.Split(dir, "/")
	for i, comp := range parts {
		err := unix.Mkdirat(cur, comp, 0o755)
		if err == nil {
			t.implicit[strings.Join(parts[:i+1], "/")] = true
			err = unix.Fchmodat(cur, comp, 0o755, 0)
		} else if errors.Is(err, unix.EEXIST) {
			err = nil
		}
		next := -1
		if err == nil {
			next, err = unix.Openat2(cur, comp, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: beneath})
		}
		if cur != t.root {
			unix.Close(cur)
		}
		if err != nil {
			return -1, dirErr(strings.Join(parts[:i+1], "/"), err)
		}
		cur = next
	}
	return cur, nil
}

func dirErr(dir string, err error) error {
	switch {
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV):
		return errf(ErrUnsafe, "%q is a symbolic link; refusing to write through it", dir)
	case errors.Is(err, unix.ENOTDIR):
		return errf(ErrInvalid, "%q is not a directory", dir)
	}
	return &os.PathError{Op: "open", Path: dir, Err: err}
}

// clear removes what name holds, except a directory when keepDir; it says
// whether a directory was kept.
func (t *tree) clear(fd int, name, base string, keepDir bool) (bool, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(fd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return false, unix.Unlinkat(fd, base, 0)
	}
	if keepDir {
		return true, nil
	}
	if strings.HasPrefix(t.cached+"/", name+"/") {
		t.dropCache()
	}
	// Every component of name is a real directory (resolved beneath), and
	// RemoveAll follows no symbolic link.
	return false, os.RemoveAll(filepath.Join(t.dir, name))
}

// meta is what an entry keeps: numeric owner, permission bits (setuid and
// setgid already stripped) and modification time.
type meta struct {
	uid, gid int
	mode     uint32
	mtime    time.Time
}

func (t *tree) mkdir(name string, m meta) error {
	fd, base, err := t.parent(name, true)
	if err != nil {
		return err
	}
	kept, err := t.clear(fd, name, base, true)
	if err != nil {
		return err
	}
	if !kept {
		if err := unix.Mkdirat(fd, base, 0o700); err != nil {
			return err
		}
	}
	delete(t.implicit, name)
	d, err := unix.Openat(fd, base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(d)
	t.dirTimes[name] = m.mtime
	return fchownmod(d, m)
}

func fchownmod(fd int, m meta) error {
	if err := unix.Fchown(fd, m.uid, m.gid); err != nil {
		return err
	}
	return unix.Fchmod(fd, m.mode)
}

// file makes a regular file with r's content.
func (t *tree) file(name string, m meta, r io.Reader) error {
	fd, base, err := t.parent(name, true)
	if err != nil {
		return err
	}
	if _, err := t.clear(fd, name, base, false); err != nil {
		return err
	}
	nfd, err := unix.Openat(fd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(nfd), name)
	_, err = io.Copy(f, r)
	if err == nil {
		err = fchownmod(nfd, m)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return setTime(fd, base, m.mtime)
}

func setTime(fd int, base string, mtime time.Time) error {
	ts := unix.NsecToTimespec(mtime.UnixNano())
	return unix.UtimesNanoAt(fd, base, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW)
}

// symlink makes a symbolic link whose target is kept verbatim: it is
// resolved inside the computer's root, never by the host.
func (t *tree) symlink(name, target string, m meta) error {
	fd, base, err := t.parent(name, true)
	if err != nil {
		return err
	}
	if _, err := t.clear(fd, name, base, false); err != nil {
		return err
	}
	if err := unix.Symlinkat(target, fd, base); err != nil {
		return err
	}
	if err := unix.Fchownat(fd, base, m.uid, m.gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	return setTime(fd, base, m.mtime)
}

// linkFrom makes name a hard link to src's entry target (which, if it is a
// symbolic link, is linked itself, not followed).
func (t *tree) linkFrom(src *tree, target, name string) error {
	sfd, err := src.openDir(path.Dir(target))
	if err != nil {
		return err
	}
	defer unix.Close(sfd)
	fd, base, err := t.parent(name, true)
	if err != nil {
		return err
	}
	if _, err := t.clear(fd, name, base, false); err != nil {
		return err
	}
	return unix.Linkat(sfd, path.Base(target), fd, base, 0)
}

// lstat stats name without following it.
func (t *tree) lstat(name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := t.openDir(path.Dir(name))
	if err != nil {
		return st, err
	}
	defer unix.Close(fd)
	return st, unix.Fstatat(fd, path.Base(name), &st, unix.AT_SYMLINK_NOFOLLOW)
}

// finish sets the directories' modification times, now that their
// content is complete.
func (t *tree) finish() error {
	for name, mtime := range t.dirTimes {
		fd, base, err := t.parent(name, false)
		if err == nil {
			err = setTime(fd, base, mtime)
		}
		if err != nil && !errors.Is(err, unix.ENOENT) {
			return err
		}
	}
	return nil
}
