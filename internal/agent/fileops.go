package agent

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
)

const maxListEntries = 10000

// upload is a file write in progress. Content goes to a temporary file in
// the target's directory and is renamed over the target only when complete,
// so a failed or oversized upload never destroys what was there.
type upload struct {
	dirfd   int
	tmp     string
	base    string
	display string
	f       *os.File
	written int64
	err     error
}

func (s *Server) maxFile(limit int64) int64 {
	if limit <= 0 || limit > s.init.MaxFile {
		return s.init.MaxFile
	}
	return limit
}

func (s *Server) startUpload(id uint32, req protocol.FileWrite) {
	u, err := s.openUpload(id, req)
	if err != nil {
		s.sendError(id, err)
		return
	}
	s.mu.Lock()
	s.uploads[id] = u
	s.mu.Unlock()
}

func (s *Server) openUpload(id uint32, req protocol.FileWrite) (*upload, error) {
	r, err := rel(req.Path)
	if err != nil {
		return nil, err
	}
	if r == "." {
		return nil, pathError(protocol.ErrIsDir, WorkspacePath)
	}
	mode := req.Mode & 0o777
	if mode == 0 {
		mode = 0o644
	}
	dir, base := path.Split(r)
	dir = path.Clean(dir + ".")
	u := &upload{base: base, display: display(r), tmp: ".cubicle-upload-" + strconv.FormatUint(uint64(id), 10) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)}
	err = s.ws.as(func() error {
		if req.Parents && dir != "." {
			if err := s.ws.mkdirAll(dir); err != nil {
				return err
			}
		}
		dirfd, err := s.ws.open(dir, unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if unix.Fstatat(dirfd, base, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
			switch st.Mode & unix.S_IFMT {
			case unix.S_IFREG:
			case unix.S_IFLNK:
				// Writing "through" a symlink would replace the link; refuse,
				// saying where it leads when that is outside.
				unix.Close(dirfd)
				if fd, err := s.ws.open(r, unix.O_PATH, 0); err != nil {
					if errors.Is(err, protocol.ErrPathEscape) {
						return err
					}
				} else {
					unix.Close(fd)
				}
				return fmt.Errorf("%s: %w (it is a symlink)", u.display, protocol.ErrNotRegular)
			default:
				unix.Close(dirfd)
				return notRegular(u.display, st.Mode)
			}
		}
		fd, err := unix.Openat(dirfd, u.tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
		if err != nil {
			unix.Close(dirfd)
			return errnoError(err, u.display)
		}
		u.dirfd = dirfd
		u.f = os.NewFile(uintptr(fd), u.tmp)
		return nil
	})
	return u, err
}

func (s *Server) uploadInput(f protocol.Frame) {
	s.mu.Lock()
	u := s.uploads[f.ID]
	if f.Kind == protocol.KindDataEnd {
		delete(s.uploads, f.ID)
	}
	s.mu.Unlock()
	if u == nil {
		return // the upload failed already and its error was sent
	}
	if f.Kind == protocol.KindData {
		if u.err != nil {
			return
		}
		if u.written+int64(len(f.Payload)) > s.init.MaxFile {
			u.err = fmt.Errorf("%s: %w: the limit is %d bytes", u.display, protocol.ErrTooLarge, s.init.MaxFile)
			return
		}
		n, err := u.f.Write(f.Payload)
		protocol.Recycle(f)
		u.written += int64(n)
		if err != nil {
			u.err = errnoError(err, u.display)
		}
		return
	}
	go s.finishUpload(f.ID, u, len(f.Payload) > 0)
}

// finishUpload commits or discards an upload; a non-empty DataEnd payload
// means the host aborted it.
func (s *Server) finishUpload(id uint32, u *upload, aborted bool) {
	err := u.err
	if cerr := u.f.Close(); err == nil && cerr != nil {
		err = errnoError(cerr, u.display)
	}
	if aborted && err == nil {
		err = fmt.Errorf("%w: upload aborted", protocol.ErrInvalid)
	}
	commit := s.ws.as(func() error {
		defer unix.Close(u.dirfd)
		if err != nil {
			unix.Unlinkat(u.dirfd, u.tmp, 0)
			return err
		}
		if rerr := unix.Renameat(u.dirfd, u.tmp, u.dirfd, u.base); rerr != nil {
			unix.Unlinkat(u.dirfd, u.tmp, 0)
			return errnoError(rerr, u.display)
		}
		return nil
	})
	if commit != nil {
		s.sendError(id, commit)
		return
	}
	s.sendJSON(protocol.KindOK, id, protocol.Written{Path: u.display, Bytes: u.written})
}

func (s *Server) readFile(id uint32, req protocol.FileRead) {
	r, err := rel(req.Path)
	if err != nil {
		s.sendError(id, err)
		return
	}
	var f *os.File
	var size int64
	var before unix.Stat_t
	var leased bool
	err = s.ws.asUnlocked(func() error {
		fd, err := s.ws.open(r, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
		if err != nil {
			return s.ws.explain(r, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return errnoError(err, display(r))
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			unix.Close(fd)
			return notRegular(display(r), st.Mode)
		}
		if req.Snapshot {
			var err error
			if leased, err = readLease(fd, display(r)); err != nil {
				unix.Close(fd)
				return err
			}
		}
		f, size, before = os.NewFile(uintptr(fd), r), st.Size, st
		return nil
	})
	if err != nil {
		s.sendError(id, err)
		return
	}
	defer f.Close()
	limit := s.maxFile(req.Limit)
	buf := make([]byte, protocol.ChunkSize)
	var sent int64
	for sent < limit {
		want := int64(len(buf))
		if limit-sent < want {
			want = limit - sent
		}
		n, rerr := f.Read(buf[:want])
		if n > 0 {
			if s.send(protocol.KindData, id, buf[:n]) != nil {
				return
			}
			sent += int64(n)
		}
		if rerr != nil {
			break
		}
	}
	changed, now := changedSince(f, &before, leased)
	size = max(size, sent, now) // the file may have grown while being read
	s.sendJSON(protocol.KindDataEnd, id, protocol.DataEnd{Path: display(r), Size: size, Truncated: sent < size, Changed: changed})
}

// explain turns an open failure on a special file into a precise error:
// opening a FIFO without a peer or a device on a nodev mount fails with
// errors that would otherwise read as "permission denied".
func (ws *workspace) explain(r string, err error) error {
	fd, perr := ws.open(r, unix.O_PATH, 0)
	if perr != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT != unix.S_IFREG {
		return notRegular(display(r), st.Mode)
	}
	return err
}

func (s *Server) pathOp(id uint32, kind protocol.Kind, req protocol.PathRequest) {
	r, err := rel(req.Path)
	if err != nil {
		s.sendError(id, err)
		return
	}
	var reply any
	err = s.ws.as(func() error {
		var err error
		switch kind {
		case protocol.KindStat:
			reply, err = s.ws.stat(r)
		case protocol.KindList:
			reply, err = s.ws.list(r)
		case protocol.KindMkdir:
			reply, err = struct{}{}, s.ws.mkdir(r, req.Parents)
		case protocol.KindRemove:
			reply, err = struct{}{}, s.ws.remove(r, req.Recursive)
		}
		return err
	})
	if err != nil {
		s.sendError(id, err)
		return
	}
	s.sendJSON(protocol.KindOK, id, reply)
}

func info(name, p string, st *unix.Stat_t) protocol.FileInfo {
	return protocol.FileInfo{
		Name: name, Path: p, Type: typeName(st.Mode), Size: st.Size,
		Mode:    st.Mode & 0o7777,
		ModTime: time.Unix(st.Mtim.Sec, st.Mtim.Nsec).UTC(),
	}
}

func (ws *workspace) stat(r string) (protocol.FileInfo, error) {
	fd, err := ws.open(r, unix.O_PATH|unix.O_NOFOLLOW, 0)
	if err != nil {
		return protocol.FileInfo{}, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return protocol.FileInfo{}, errnoError(err, display(r))
	}
	return info(path.Base(display(r)), display(r), &st), nil
}

func (ws *workspace) list(r string) (protocol.Listing, error) {
	fd, err := ws.open(r, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return protocol.Listing{}, err
	}
	dir := os.NewFile(uintptr(fd), r)
	defer dir.Close()
	names, err := dir.Readdirnames(maxListEntries + 1)
	if err != nil && len(names) == 0 {
		return protocol.Listing{Entries: []protocol.FileInfo{}}, nil
	}
	out := protocol.Listing{Entries: make([]protocol.FileInfo, 0, len(names))}
	if len(names) > maxListEntries {
		names, out.Truncated = names[:maxListEntries], true
	}
	for _, name := range names {
		var st unix.Stat_t
		if unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			continue // removed since the directory was read
		}
		out.Entries = append(out.Entries, info(name, path.Join(display(r), name), &st))
	}
	return out, nil
}

func (ws *workspace) mkdir(r string, parents bool) error {
	if r == "." {
		if parents {
			return nil
		}
		return pathError(protocol.ErrExists, WorkspacePath)
	}
	if parents {
		return ws.mkdirAll(r)
	}
	return ws.mkdirOne(r)
}

func (ws *workspace) mkdirOne(r string) error {
	dir, base := path.Split(r)
	dirfd, err := ws.open(path.Clean(dir+"."), unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer unix.Close(dirfd)
	if err := unix.Mkdirat(dirfd, base, 0o755); err != nil {
		return errnoError(err, display(r))
	}
	return nil
}

func (ws *workspace) mkdirAll(r string) error {
	prefix := ""
	for _, part := range splitPath(r) {
		prefix = path.Join(prefix, part)
		err := ws.mkdirOne(prefix)
		if err == nil {
			continue
		}
		fd, oerr := ws.open(prefix, unix.O_PATH|unix.O_DIRECTORY, 0)
		if oerr == nil {
			unix.Close(fd) // already a directory (or a symlink to one inside the workspace)
			continue
		}
		if errors.Is(err, protocol.ErrExists) {
			return oerr // it exists but cannot be used: say why (escape, not a directory...)
		}
		return err
	}
	return nil
}

func splitPath(r string) []string {
	var parts []string
	for r != "." && r != "" {
		dir, base := path.Split(r)
		parts = append([]string{base}, parts...)
		r = path.Clean(dir + ".")
	}
	return parts
}

func (ws *workspace) remove(r string, recursive bool) error {
	if r == "." {
		return fmt.Errorf("%w: the workspace itself cannot be removed", protocol.ErrInvalid)
	}
	dir, base := path.Split(r)
	dirfd, err := ws.open(path.Clean(dir+"."), unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer unix.Close(dirfd)
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return errnoError(err, display(r))
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		if err := unix.Unlinkat(dirfd, base, 0); err != nil {
			return errnoError(err, display(r))
		}
		return nil
	}
	if recursive {
		if err := removeChildren(dirfd, base, 0); err != nil {
			return errnoError(err, display(r))
		}
	}
	if err := unix.Unlinkat(dirfd, base, unix.AT_REMOVEDIR); err != nil {
		return errnoError(err, display(r))
	}
	return nil
}

const maxRemoveDepth = 512

// removeChildren empties a directory without following symlinks: every step
// is relative to a directory descriptor opened with O_NOFOLLOW.
func removeChildren(parent int, name string, depth int) error {
	if depth > maxRemoveDepth {
		return unix.ELOOP
	}
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	dir := os.NewFile(uintptr(fd), name)
	defer dir.Close()
	for {
		names, rerr := dir.Readdirnames(256)
		for _, child := range names {
			var st unix.Stat_t
			if unix.Fstatat(fd, child, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
				continue
			}
			if st.Mode&unix.S_IFMT == unix.S_IFDIR {
				if err := removeChildren(fd, child, depth+1); err != nil {
					return err
				}
				if err := unix.Unlinkat(fd, child, unix.AT_REMOVEDIR); err != nil {
					return err
				}
				continue
			}
			if err := unix.Unlinkat(fd, child, 0); err != nil && err != unix.ENOENT {
				return err
			}
		}
		if rerr != nil || len(names) == 0 {
			return nil
		}
	}
}
