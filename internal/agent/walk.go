package agent

import (
	"fmt"
	"os"
	"path"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
)

// Pages of a directory listing (protocol.KindWalk), recursive or not, as
// the sandbox user, through no symlink and across no mount: each
// directory's entries sorted by name, a directory followed by its own
// entries (depth first). A page resumes after a path, found again by
// its components, so no state is kept between pages and an entry
// removed meanwhile costs nothing: the walk goes on from where it was.

// walkPageBytes bounds the names and paths of one page, so that its reply
// fits a frame however long they are (JSON may escape them sixfold).
const walkPageBytes = 128 << 10

// walker is one page's walk.
type walker struct {
	req   protocol.WalkRequest
	limit int
	names int // names read so far
	bytes int // of the names and paths of the page's entries
	page  protocol.WalkPage
	full  bool // the page is complete: stop
}

func (s *Server) walk(id uint32, req protocol.WalkRequest) {
	var page protocol.WalkPage
	err := s.ws.as(func() error {
		var err error
		page, err = s.ws.walk(req)
		return err
	})
	if err != nil {
		s.sendError(id, err)
		return
	}
	s.sendJSON(protocol.KindOK, id, page)
}

// walk answers one page of req.
func (ws *workspace) walk(req protocol.WalkRequest) (protocol.WalkPage, error) {
	r, err := rel(req.Path)
	if err != nil {
		return protocol.WalkPage{}, err
	}
	var after []string
	if req.After != "" {
		if after, err = walkCursor(r, req.After); err != nil {
			return protocol.WalkPage{}, err
		}
		if !req.Recursive && len(after) > 1 {
			return protocol.WalkPage{}, fmt.Errorf("%w: after: %s is not an entry of %s", protocol.ErrInvalid, req.After, display(r))
		}
	}
	fd, err := ws.open(r, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return protocol.WalkPage{}, err
	}
	defer unix.Close(fd)
	w := &walker{req: req, limit: req.Limit}
	if w.limit <= 0 || w.limit > protocol.MaxWalkLimit {
		w.limit = protocol.MaxWalkLimit
	}
	w.page.Entries = []protocol.FileInfo{}
	if err := w.dir(fd, display(r), 1, after); err != nil {
		return protocol.WalkPage{}, err
	}
	return w.page, nil
}

// walkCursor is after's components below the directory r.
func walkCursor(r, after string) ([]string, error) {
	a, err := rel(after)
	if err != nil {
		return nil, fmt.Errorf("%w: after: %v", protocol.ErrInvalid, err)
	}
	rest := a
	if r != "." {
		var ok bool
		if rest, ok = strings.CutPrefix(a, r+"/"); !ok {
			return nil, fmt.Errorf("%w: after: %s is not below %s", protocol.ErrInvalid, after, display(r))
		}
	} else if a == "." {
		return nil, fmt.Errorf("%w: after: %s is not below %s", protocol.ErrInvalid, after, display(r))
	}
	return strings.Split(rest, "/"), nil
}

// dir lists the directory fd (at p, depth levels below the walk's
// directory) after the cursor's components after (nil: all of it).
func (w *walker) dir(fd int, p string, depth int, after []string) error {
	if w.names >= protocol.MaxWalkNames {
		if len(w.page.Entries) == 0 {
			return fmt.Errorf("%w: listing %s would read more than %d names for one page; list a directory below it",
				protocol.ErrTooLarge, p, protocol.MaxWalkNames)
		}
		w.page.More, w.full = true, true // the next page resumes here
		return nil
	}
	names, err := w.readNames(fd, p)
	if err != nil {
		return err
	}
	i := 0
	if len(after) > 0 {
		i, _ = slices.BinarySearch(names, after[0])
		if i < len(names) && names[i] == after[0] {
			// The cursor's entry: listed already; what is below it is next.
			if w.req.Recursive {
				if err := w.descend(fd, names[i], path.Join(p, names[i]), depth, after[1:]); err != nil || w.full {
					return err
				}
			}
			i++
		}
	}
	for _, name := range names[i:] {
		var st unix.Stat_t
		if unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			continue // removed since the directory was read
		}
		child := path.Join(p, name)
		if len(w.page.Entries) == w.limit || w.bytes+len(name)+len(child) > walkPageBytes && len(w.page.Entries) > 0 {
			w.page.More, w.full = true, true
			return nil
		}
		w.bytes += len(name) + len(child)
		w.page.Entries = append(w.page.Entries, info(name, child, &st))
		if w.req.Recursive && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			if err := w.descend(fd, name, child, depth, nil); err != nil || w.full {
				return err
			}
		}
	}
	return nil
}

// descend walks the directory name of fd, unless it is too deep, a mount
// point, or unreadable to the user (it is listed, its entries are not).
func (w *walker) descend(fd int, name, p string, depth int, after []string) error {
	if depth >= protocol.MaxWalkDepth {
		w.page.Truncated = true
		return nil
	}
	cfd, err := unix.Openat2(fd, name, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: resolveFlags | unix.RESOLVE_NO_SYMLINKS,
	})
	if err != nil {
		return nil // not a directory (any more), a mount, a symlink, or unreadable
	}
	defer unix.Close(cfd)
	return w.dir(cfd, p, depth+1, after)
}

// readNames reads a directory's names, at most MaxWalkDirEntries, sorted.
func (w *walker) readNames(fd int, p string) ([]string, error) {
	dfd, err := unix.Dup(fd)
	if err != nil {
		return nil, errnoError(err, p)
	}
	unix.CloseOnExec(dfd)
	d := os.NewFile(uintptr(dfd), p)
	defer d.Close()
	names, err := d.Readdirnames(protocol.MaxWalkDirEntries + 1)
	if err != nil && len(names) == 0 {
		names = nil // empty, or removed meanwhile
	}
	if len(names) > protocol.MaxWalkDirEntries {
		names, w.page.Truncated = names[:protocol.MaxWalkDirEntries], true
	}
	w.names += len(names)
	slices.Sort(names)
	return names, nil
}
