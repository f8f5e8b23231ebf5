package agent

import (
	"archive/tar"
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
)

// A directory as a tar archive. The tree is walked twice, as the sandbox
// user and following no symlink below the directory: once to count (so an
// archive over the limits is refused before its first byte), then to
// write. Each directory is read and each file opened on a worker thread;
// content is read and sent off them.

// errTarCancelled ends a download the host stopped.
var errTarCancelled = errors.New("tar download cancelled")

func (s *Server) startTarRead(id uint32, req protocol.TarRead) {
	cancel := new(atomic.Bool)
	s.mu.Lock()
	s.tarReads[id] = cancel
	s.mu.Unlock()
	go func() {
		defer func() {
			s.mu.Lock()
			delete(s.tarReads, id)
			s.mu.Unlock()
		}()
		done, err := s.readTar(id, req, cancel)
		if errors.Is(err, errTarCancelled) {
			return
		}
		if err != nil {
			s.sendError(id, err)
			return
		}
		s.sendJSON(protocol.KindDataEnd, id, done)
	}()
}

// tarEntry is one entry of a directory being archived.
type tarEntry struct {
	name string // relative to the archived directory
	base string // within its own directory
	st   unix.Stat_t
	link string
}

// tarWalker walks a directory tree, counting against the limits.
type tarWalker struct {
	ws         *workspace
	root       string // the archived directory's path in the computer
	maxBytes   int64
	maxEntries int
	entries    int
	bytes      int64
}

func (w *tarWalker) count(size int64) error {
	w.entries++
	w.bytes += size
	if w.maxEntries > 0 && w.entries > w.maxEntries {
		return w.tooMany()
	}
	if w.maxBytes > 0 && w.bytes > w.maxBytes {
		return fmt.Errorf("%w: the files of %s are more than %d bytes (the limit of an archive)", protocol.ErrTooLarge, w.root, w.maxBytes)
	}
	return nil
}

func (w *tarWalker) tooMany() error {
	return fmt.Errorf("%w: %s has more than %d entries (the limit of an archive)", protocol.ErrTooLarge, w.root, w.maxEntries)
}

// path is an entry's path in the computer, for messages.
func (w *tarWalker) path(name string) string { return path.Join(w.root, name) }

// readDir reads a directory's entries, sorted, with their lstat and link
// targets; files removed meanwhile are left out. Call it on a worker.
func (w *tarWalker) readDir(dir *os.File, prefix string) ([]tarEntry, error) {
	var names []string
	for {
		batch, err := dir.Readdirnames(1024)
		names = append(names, batch...)
		if w.maxEntries > 0 && w.entries+len(names) > w.maxEntries {
			return nil, w.tooMany()
		}
		if err != nil || len(batch) == 0 {
			break
		}
	}
	sort.Strings(names)
	fd := int(dir.Fd())
	out := make([]tarEntry, 0, len(names))
	for _, name := range names {
		e := tarEntry{name: path.Join(prefix, name), base: name}
		if unix.Fstatat(fd, name, &e.st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			continue
		}
		if e.st.Mode&unix.S_IFMT == unix.S_IFLNK {
			buf := make([]byte, maxPathLen)
			n, err := unix.Readlinkat(fd, name, buf)
			if err != nil {
				continue
			}
			e.link = string(buf[:n])
		}
		out = append(out, e)
	}
	return out, nil
}

// walk visits dir's tree (depth first, sorted); visit gets each regular
// file, directory and symlink with the descriptor of its directory.
func (w *tarWalker) walk(dir *os.File, prefix string, depth int, visit func(e *tarEntry, dirfd int) error) error {
	if depth > maxRemoveDepth {
		return fmt.Errorf("%w: %s: directories nested more than %d deep", protocol.ErrInvalid, w.path(prefix), maxRemoveDepth)
	}
	var ents []tarEntry
	if err := w.ws.as(func() error {
		var err error
		ents, err = w.readDir(dir, prefix)
		return err
	}); err != nil {
		return err
	}
	fd := int(dir.Fd())
	for i := range ents {
		e := &ents[i]
		switch e.st.Mode & unix.S_IFMT {
		case unix.S_IFREG, unix.S_IFLNK:
			if err := visit(e, fd); err != nil {
				return err
			}
		case unix.S_IFDIR:
			if err := visit(e, fd); err != nil {
				return err
			}
			var sub *os.File
			err := w.ws.as(func() error {
				sfd, err := unix.Openat(fd, e.base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
				if err != nil {
					return err
				}
				sub = os.NewFile(uintptr(sfd), e.name)
				return nil
			})
			if err == unix.ENOENT {
				continue
			}
			if err != nil {
				return errnoError(err, w.path(e.name))
			}
			err = w.walk(sub, e.name, depth+1, visit)
			sub.Close()
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// frameWriter sends what is written as data frames of a stream.
type frameWriter struct {
	s      *Server
	id     uint32
	cancel *atomic.Bool
}

func (f *frameWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		if f.cancel.Load() {
			return n, errTarCancelled
		}
		c := min(len(p), protocol.ChunkSize)
		if err := f.s.send(protocol.KindData, f.id, p[:c]); err != nil {
			return n, err
		}
		n, p = n+c, p[c:]
	}
	return n, nil
}

func (s *Server) readTar(id uint32, req protocol.TarRead, cancel *atomic.Bool) (protocol.TarDone, error) {
	r, err := rel(req.Path)
	if err != nil {
		return protocol.TarDone{}, err
	}
	open := func() (*os.File, error) {
		var dir *os.File
		err := s.ws.as(func() error {
			fd, err := s.ws.open(r, unix.O_RDONLY|unix.O_DIRECTORY, 0)
			if err != nil {
				return err
			}
			dir = os.NewFile(uintptr(fd), r)
			return nil
		})
		return dir, err
	}
	// First the count: over the limits, nothing is sent.
	dir, err := open()
	if err != nil {
		return protocol.TarDone{}, err
	}
	counter := &tarWalker{ws: s.ws, root: display(r), maxBytes: req.MaxBytes, maxEntries: req.MaxEntries}
	err = counter.walk(dir, "", 0, func(e *tarEntry, _ int) error {
		if e.st.Mode&unix.S_IFMT == unix.S_IFREG {
			return counter.count(e.st.Size)
		}
		return counter.count(0)
	})
	dir.Close()
	if err != nil {
		return protocol.TarDone{}, err
	}
	if dir, err = open(); err != nil {
		return protocol.TarDone{}, err
	}
	defer dir.Close()
	bw := bufio.NewWriterSize(&frameWriter{s: s, id: id, cancel: cancel}, protocol.ChunkSize)
	tw := tar.NewWriter(bw)
	w := &tarWalker{ws: s.ws, root: display(r), maxBytes: req.MaxBytes, maxEntries: req.MaxEntries}
	buf := make([]byte, protocol.ChunkSize)
	err = w.walk(dir, "", 0, func(e *tarEntry, dirfd int) error {
		// mtimes in whole seconds, truncated (tar's writer would round)
		hdr := &tar.Header{Name: e.name, Mode: int64(e.st.Mode & 0o7777), Uid: int(e.st.Uid), Gid: int(e.st.Gid),
			ModTime: time.Unix(e.st.Mtim.Sec, 0)}
		switch e.st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			hdr.Typeflag, hdr.Name = tar.TypeDir, e.name+"/"
		case unix.S_IFLNK:
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, e.link
		default:
			return s.tarFile(w, tw, hdr, e, dirfd, buf)
		}
		if err := w.count(0); err != nil {
			return err
		}
		return tw.WriteHeader(hdr)
	})
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		return protocol.TarDone{}, err
	}
	return protocol.TarDone{Path: display(r), Entries: w.entries, Bytes: w.bytes}, nil
}

// tarFile adds a regular file: its size when opened, its content as read
// then (zeros for what it lost meanwhile, nothing of what it gained).
func (s *Server) tarFile(w *tarWalker, tw *tar.Writer, hdr *tar.Header, e *tarEntry, dirfd int, buf []byte) error {
	var f *os.File
	err := s.ws.asUnlocked(func() error {
		fd, err := unix.Openat(dirfd, e.base, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		if err == unix.EAGAIN {
			return lockedError(w.path(e.name))
		}
		if err != nil {
			return err
		}
		f = os.NewFile(uintptr(fd), e.name)
		return nil
	})
	if err == unix.ENOENT || err == unix.ELOOP {
		return nil // removed or replaced by a symlink since it was listed
	}
	if err != nil {
		if errors.Is(err, protocol.ErrLocked) {
			return err
		}
		return errnoError(err, w.path(e.name))
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return errnoError(err, w.path(e.name))
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil
	}
	if err := w.count(st.Size); err != nil {
		return err
	}
	hdr.Typeflag, hdr.Size, hdr.Mode = tar.TypeReg, st.Size, int64(st.Mode&0o7777)
	hdr.ModTime = time.Unix(st.Mtim.Sec, 0)
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	n, err := io.CopyBuffer(tw, io.LimitReader(f, st.Size), buf)
	if err != nil && !errors.Is(err, tar.ErrWriteTooLong) {
		if errors.Is(err, errTarCancelled) {
			return err
		}
		var errno unix.Errno
		if errors.As(err, &errno) {
			return errnoError(err, w.path(e.name))
		}
		return err
	}
	for n < st.Size { // the file shrank while it was read
		c := min(int64(len(buf)), st.Size-n)
		clear(buf[:c])
		if _, err := tw.Write(buf[:c]); err != nil {
			return err
		}
		n += c
	}
	return nil
}
