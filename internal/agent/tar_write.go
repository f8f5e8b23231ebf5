package agent

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
)

// Extraction of a tar archive into a directory of the workspace. Every
// lookup is relative to a descriptor of the target directory with
// openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | ...): no entry lands
// outside it and no symlink is followed, whether the archive made it or
// it was in the workspace already. Files are written to a temporary name
// and renamed into place (a symlink there is replaced, never written
// through); directories' modes and mtimes are set once everything is in.

// tarResolve is resolveFlags without any symlink at all.
const tarResolve = resolveFlags | unix.RESOLVE_NO_SYMLINKS

// openNoSymlinks resolves r beneath dirfd, following no symlink.
func openNoSymlinks(dirfd int, r string, flags uint64) (int, error) {
	for races := 0; ; races++ {
		fd, err := unix.Openat2(dirfd, r, &unix.OpenHow{Flags: flags | unix.O_CLOEXEC, Resolve: tarResolve})
		if err == unix.EINTR || (err == unix.EAGAIN && races < maxLookupRetries) {
			continue
		}
		return fd, err
	}
}

// tarUpload is an extraction in progress: the archive's frames go into
// pw, read by the extracting goroutine; done closes when it has finished,
// with err (already sent to the host) or result (sent at the stream's end).
type tarUpload struct {
	pw     *io.PipeWriter
	done   chan struct{}
	err    error
	result protocol.TarDone
}

// errTarEnded closes an archive's pipe once its extraction is over: the
// frames still to come (padding after the end marker) are dropped.
var errTarEnded = errors.New("tar extraction ended")

func (s *Server) startTarWrite(id uint32, req protocol.TarWrite) {
	r, err := rel(req.Path)
	if err != nil {
		s.sendError(id, err)
		return
	}
	var root int
	err = s.ws.as(func() error {
		var err error
		root, err = mkdirNoSymlinks(int(s.ws.root.Fd()), r)
		return err
	})
	if err != nil {
		s.sendError(id, err)
		return
	}
	pr, pw := io.Pipe()
	t := &tarUpload{pw: pw, done: make(chan struct{})}
	s.mu.Lock()
	s.tars[id] = t
	s.mu.Unlock()
	x := &extractor{ws: s.ws, root: root, display: display(r), maxBytes: req.MaxBytes, maxEntries: req.MaxEntries,
		maxFile: s.init.MaxFile, tmp: ".cubicle-tar-" + strconv.FormatUint(uint64(id), 10) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)}
	go func() {
		defer close(t.done)
		defer unix.Close(root)
		done, err := x.run(pr)
		if err != nil {
			pr.CloseWithError(err)
			t.err = err
			s.sendError(id, err)
			return
		}
		pr.CloseWithError(errTarEnded)
		t.result = done
	}()
}

// tarInput takes a data frame of a tar stream (an upload's content, or
// the host's cancel of a download); false: the frame is not a tar's.
func (s *Server) tarInput(f protocol.Frame) bool {
	s.mu.Lock()
	t := s.tars[f.ID]
	if t != nil && f.Kind == protocol.KindDataEnd {
		delete(s.tars, f.ID)
	}
	cancel := s.tarReads[f.ID]
	s.mu.Unlock()
	if cancel != nil {
		cancel.Store(true)
		return true
	}
	if t == nil {
		return false
	}
	if f.Kind == protocol.KindData {
		t.pw.Write(f.Payload) // returns once extracted, or at once after the extraction ended
		protocol.Recycle(f)
		return true
	}
	if len(f.Payload) > 0 {
		t.pw.CloseWithError(fmt.Errorf("%w: upload aborted", protocol.ErrInvalid))
	} else {
		t.pw.Close()
	}
	go func() {
		<-t.done
		if t.err == nil {
			s.sendJSON(protocol.KindOK, f.ID, t.result)
		}
	}()
	return true
}

// mkdirNoSymlinks opens directory r beneath dirfd (O_PATH), creating it
// and its missing parents, through no symlink. Call it on a worker thread.
func mkdirNoSymlinks(dirfd int, r string) (int, error) {
	fd, err := openNoSymlinks(dirfd, ".", unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return -1, errnoError(err, WorkspacePath)
	}
	at := "."
	for _, part := range splitPath(r) {
		at = path.Join(at, part)
		if err := unix.Mkdirat(fd, part, 0o755); err != nil && err != unix.EEXIST {
			unix.Close(fd)
			return -1, errnoError(err, display(at))
		}
		next, err := openNoSymlinks(fd, part, unix.O_PATH|unix.O_DIRECTORY)
		unix.Close(fd)
		if err != nil {
			return -1, noSymlinkError(err, display(at))
		}
		fd = next
	}
	return fd, nil
}

// noSymlinkError is errnoError, saying so when a symlink was in the way.
func noSymlinkError(err error, p string) error {
	if errors.Is(err, unix.ELOOP) {
		return fmt.Errorf("%w: %s is a symlink, and extracting an archive never follows symlinks", protocol.ErrInvalid, p)
	}
	return errnoError(err, p)
}

// extractor extracts one archive beneath root.
type extractor struct {
	ws         *workspace
	root       int    // the target directory (O_PATH)
	display    string // its path in the computer
	maxBytes   int64  // the files together
	maxEntries int
	maxFile    int64 // one file (≤ 0: no limit but the disk)
	tmp        string
	n          int // temporary names used
	buf        []byte

	entries int
	bytes   int64
	dirs    []dirMeta
}

// dirMeta is what a directory gets once the archive is in: read-only
// directories would refuse their own entries if it came first.
type dirMeta struct {
	entry, name string
	mode        uint32
	mtime       time.Time
}

func (x *extractor) run(r io.Reader) (protocol.TarDone, error) {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return protocol.TarDone{}, archiveError(err)
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		if x.entries++; x.maxEntries > 0 && x.entries > x.maxEntries {
			return protocol.TarDone{}, fmt.Errorf("%w: the archive has more than %d entries (the limit)", protocol.ErrTooLarge, x.maxEntries)
		}
		if err := x.entry(hdr, tr); err != nil {
			return protocol.TarDone{}, err
		}
	}
	for i := len(x.dirs) - 1; i >= 0; i-- {
		if err := x.finishDir(x.dirs[i]); err != nil {
			return protocol.TarDone{}, err
		}
	}
	return protocol.TarDone{Path: x.display, Entries: x.entries, Bytes: x.bytes}, nil
}

// archiveError is the error of reading the archive: the host's abort as
// it is, anything else a malformed archive.
func archiveError(err error) error {
	if errors.Is(err, protocol.ErrInvalid) {
		return err
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: the tar archive ends in the middle of an entry", protocol.ErrInvalid)
	}
	return fmt.Errorf("%w: not a valid tar archive: %v", protocol.ErrInvalid, err)
}

// entryError refuses an entry, naming it.
func entryError(sentinel error, name, format string, args ...any) error {
	if len(name) > 256 {
		name = name[:256] + "…"
	}
	return fmt.Errorf("%w: tar entry %q: %s", sentinel, name, fmt.Sprintf(format, args...))
}

// entryName cleans an entry's name, refusing absolute names and "..".
func entryName(name string) (string, error) {
	switch {
	case name == "":
		return "", entryError(protocol.ErrInvalid, name, "empty name")
	case len(name) > maxPathLen || strings.IndexByte(name, 0) >= 0:
		return "", entryError(protocol.ErrInvalid, name, "name too long or with a NUL byte")
	case strings.HasPrefix(name, "/"):
		return "", entryError(protocol.ErrInvalid, name, "absolute name (entries must be relative to the directory)")
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return "", entryError(protocol.ErrInvalid, name, `".." in its name (it would land outside the directory)`)
		}
	}
	return path.Clean(name), nil
}

func (x *extractor) entry(hdr *tar.Header, r io.Reader) error {
	name, err := entryName(hdr.Name)
	if err != nil {
		return err
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		if name == "." {
			return nil // the directory itself keeps its mode and mtime
		}
		return x.mkdir(hdr.Name, name, hdr)
	case tar.TypeReg:
		if name == "." {
			return entryError(protocol.ErrInvalid, hdr.Name, "a file cannot replace the directory itself")
		}
		return x.file(hdr.Name, name, hdr, r)
	case tar.TypeSymlink:
		if name == "." {
			return entryError(protocol.ErrInvalid, hdr.Name, "a symlink cannot replace the directory itself")
		}
		return x.symlink(hdr.Name, name, hdr)
	case tar.TypeLink:
		return entryError(protocol.ErrInvalid, hdr.Name, "hard links are refused")
	case tar.TypeChar, tar.TypeBlock:
		return entryError(protocol.ErrInvalid, hdr.Name, "device files are refused")
	case tar.TypeFifo:
		return entryError(protocol.ErrInvalid, hdr.Name, "FIFOs are refused")
	}
	return entryError(protocol.ErrInvalid, hdr.Name, "entries of type %q are refused (only files, directories and symlinks)", hdr.Typeflag)
}

// pathError is the error of an entry's file operation on p.
func (x *extractor) pathError(entry, p string, err error) error {
	full := path.Join(x.display, p)
	if errors.Is(err, unix.ELOOP) {
		return entryError(protocol.ErrInvalid, entry, "%s is a symlink, and extracting an archive never follows symlinks", full)
	}
	return fmt.Errorf("tar entry %q: %w", entry, errnoError(err, full))
}

// parent opens the directory an entry goes into (O_PATH), creating the
// missing ones, through no symlink. Call it on a worker thread.
func (x *extractor) parent(entry, name string) (int, string, error) {
	dir, base := path.Split(name)
	dir = path.Clean(dir + ".")
	fd, err := openNoSymlinks(x.root, dir, unix.O_PATH|unix.O_DIRECTORY)
	if err == nil {
		return fd, base, nil
	}
	if err != unix.ENOENT {
		return -1, "", x.pathError(entry, dir, err)
	}
	if fd, err = openNoSymlinks(x.root, ".", unix.O_PATH|unix.O_DIRECTORY); err != nil {
		return -1, "", x.pathError(entry, ".", err)
	}
	at := "."
	for _, part := range splitPath(dir) {
		at = path.Join(at, part)
		if err := unix.Mkdirat(fd, part, 0o755); err != nil && err != unix.EEXIST {
			unix.Close(fd)
			return -1, "", x.pathError(entry, at, err)
		}
		next, err := openNoSymlinks(fd, part, unix.O_PATH|unix.O_DIRECTORY)
		unix.Close(fd)
		if err != nil {
			return -1, "", x.pathError(entry, at, err)
		}
		fd = next
	}
	return fd, base, nil
}

func (x *extractor) tmpName() string {
	x.n++
	return x.tmp + "-" + strconv.Itoa(x.n)
}

// perm is the mode an entry gets: its permission bits, never setuid,
// setgid or sticky.
func perm(hdr *tar.Header) uint32 { return uint32(hdr.Mode) & 0o777 }

func times(t time.Time) []unix.Timespec {
	ts := unix.NsecToTimespec(t.UnixNano())
	return []unix.Timespec{ts, ts}
}

func (x *extractor) mkdir(entry, name string, hdr *tar.Header) error {
	err := x.ws.as(func() error {
		fd, base, err := x.parent(entry, name)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := unix.Mkdirat(fd, base, 0o700); err != nil && err != unix.EEXIST {
			return x.pathError(entry, name, err)
		}
		d, err := openNoSymlinks(fd, base, unix.O_PATH|unix.O_DIRECTORY)
		if err != nil {
			return x.pathError(entry, name, err)
		}
		unix.Close(d)
		return nil
	})
	if err == nil {
		x.dirs = append(x.dirs, dirMeta{entry: entry, name: name, mode: perm(hdr), mtime: hdr.ModTime})
	}
	return err
}

func (x *extractor) finishDir(d dirMeta) error {
	return x.ws.as(func() error {
		fd, err := openNoSymlinks(x.root, d.name, unix.O_RDONLY|unix.O_DIRECTORY)
		if err == unix.ENOENT {
			return nil // removed by a process in the computer meanwhile
		}
		if err != nil {
			return x.pathError(d.entry, d.name, err)
		}
		defer unix.Close(fd)
		if err := unix.Fchmod(fd, d.mode); err != nil {
			return x.pathError(d.entry, d.name, err)
		}
		if !d.mtime.IsZero() {
			unix.UtimesNanoAt(fd, ".", times(d.mtime), 0)
		}
		return nil
	})
}

func (x *extractor) symlink(entry, name string, hdr *tar.Header) error {
	if hdr.Linkname == "" || len(hdr.Linkname) > maxPathLen {
		return entryError(protocol.ErrInvalid, entry, "a symlink's target must be 1 to %d bytes", maxPathLen)
	}
	return x.ws.as(func() error {
		fd, base, err := x.parent(entry, name)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		tmp := x.tmpName()
		if err := unix.Symlinkat(hdr.Linkname, fd, tmp); err != nil {
			return x.pathError(entry, name, err)
		}
		if !hdr.ModTime.IsZero() {
			unix.UtimesNanoAt(fd, tmp, times(hdr.ModTime), unix.AT_SYMLINK_NOFOLLOW)
		}
		if err := unix.Renameat(fd, tmp, fd, base); err != nil {
			unix.Unlinkat(fd, tmp, 0)
			return x.pathError(entry, name, err)
		}
		return nil
	})
}

func (x *extractor) file(entry, name string, hdr *tar.Header, r io.Reader) error {
	if x.maxFile > 0 && hdr.Size > x.maxFile {
		return entryError(protocol.ErrTooLarge, entry, "%d bytes, more than the computer's disk (%d bytes)", hdr.Size, x.maxFile)
	}
	if x.maxBytes > 0 && x.bytes+hdr.Size > x.maxBytes {
		return entryError(protocol.ErrTooLarge, entry, "the archive's files exceed the limit of %d bytes", x.maxBytes)
	}
	var dirfd, fd int
	var base string
	tmp := x.tmpName()
	err := x.ws.as(func() error {
		var err error
		if dirfd, base, err = x.parent(entry, name); err != nil {
			return err
		}
		if fd, err = unix.Openat(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600); err != nil {
			unix.Close(dirfd)
			return x.pathError(entry, name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	defer unix.Close(dirfd)
	n, err := x.copyEntry(fd, r, func(werr error) error { return x.pathError(entry, name, werr) })
	x.bytes += n
	return x.ws.as(func() error {
		if err == nil {
			if cerr := unix.Fchmod(fd, perm(hdr)); cerr != nil {
				err = x.pathError(entry, name, cerr)
			}
		}
		if cerr := unix.Close(fd); err == nil && cerr != nil {
			err = x.pathError(entry, name, cerr)
		}
		if err == nil && !hdr.ModTime.IsZero() {
			unix.UtimesNanoAt(dirfd, tmp, times(hdr.ModTime), unix.AT_SYMLINK_NOFOLLOW)
		}
		if err == nil {
			if rerr := unix.Renameat(dirfd, tmp, dirfd, base); rerr != nil {
				err = x.pathError(entry, name, rerr)
			}
		}
		if err != nil {
			unix.Unlinkat(dirfd, tmp, 0)
		}
		return err
	})
}

// copyEntry copies an entry's content into fd: a write error is the
// entry's (werr), a read error the archive's.
func (x *extractor) copyEntry(fd int, r io.Reader, werr func(error) error) (int64, error) {
	if x.buf == nil {
		x.buf = make([]byte, protocol.ChunkSize)
	}
	buf := x.buf
	var n int64
	for {
		m, rerr := r.Read(buf)
		for off := 0; off < m; {
			w, err := unix.Write(fd, buf[off:m])
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return n, werr(err)
			}
			off += w
			n += int64(w)
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, archiveError(rerr)
		}
	}
}
