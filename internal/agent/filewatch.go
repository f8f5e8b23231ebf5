package agent

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
)

// Watches (protocol.KindWatch): inotify on a directory of the workspace
// (and, recursive, every directory below it), as the sandbox user: each
// directory is opened beneath /workspace through no symlink and across
// no mount, and watched through its descriptor (/proc/self/fd/N), so a
// path changed meanwhile watches nothing else. Events wait in a bounded
// queue, pass at a bounded rate, and go to the host in batches from a
// sender of their own, so a slow host never stops the reading: what does
// not fit is dropped and counted in an overflow event.

// watchFrameBytes bounds the paths of one batch, well within a frame
// (paths are at most 4096 bytes, and JSON may escape them sixfold).
const watchFrameBytes = 64 << 10

const watchMask = unix.IN_CREATE | unix.IN_MODIFY | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR | unix.IN_EXCL_UNLINK

// fileWatch is one watch.
type fileWatch struct {
	s         *Server
	stream    uint32
	root      string // relative to /workspace
	recursive bool
	ino       *os.File // the inotify descriptor (non-blocking: Close ends a read)

	dirs      map[int32]string // watch descriptor → directory, relative to /workspace
	truncated bool             // a directory was left out (MaxWatchDirs)
	end       string           // why it ended, once it did

	mu      sync.Mutex
	queue   []protocol.WatchEvent
	dropped int
	tokens  float64
	refill  time.Time
	wake    chan struct{} // one pending signal: the queue changed or the watch ended
	closed  bool

	stopOnce sync.Once
	stop     chan struct{}
}

// reserveWatch registers a watch for KindWatch, in the dispatch loop so
// that a KindWatchStop right after it finds it; startWatch then opens it.
func (s *Server) reserveWatch(id uint32, req protocol.WatchRequest) (*fileWatch, error) {
	r, err := rel(req.Path)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.watches) >= protocol.MaxWatches {
		return nil, fmt.Errorf("%w: this computer already has %d file watches, the most it may; end one first",
			protocol.ErrTooManyProcs, protocol.MaxWatches)
	}
	w := &fileWatch{s: s, stream: id, root: r, recursive: req.Recursive, dirs: map[int32]string{},
		tokens: protocol.WatchQueue, refill: time.Now(), wake: make(chan struct{}, 1), stop: make(chan struct{})}
	s.watches[id] = w
	return w, nil
}

// startWatch opens a reserved watch and answers KindWatch.
func (s *Server) startWatch(ctx context.Context, w *fileWatch) {
	started, err := s.openWatch(w)
	if err != nil {
		s.dropWatch(w.stream)
		s.sendError(w.stream, err)
		return
	}
	if s.sendJSON(protocol.KindOK, w.stream, started) != nil {
		w.halt()
	}
	go w.read()
	go w.send(ctx)
}

func (s *Server) openWatch(w *fileWatch) (protocol.WatchStarted, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE) {
		return protocol.WatchStarted{}, fmt.Errorf("%w: the computer's inotify instances are used up (%v); end a watch", protocol.ErrTooManyProcs, err)
	}
	if err != nil {
		return protocol.WatchStarted{}, fmt.Errorf("%w: inotify: %v", protocol.ErrInternal, err)
	}
	w.ino = os.NewFile(uintptr(fd), "inotify")
	err = s.ws.as(func() error {
		dfd, err := s.ws.open(w.root, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			return err
		}
		defer unix.Close(dfd)
		return w.addTree(dfd, w.root, false)
	})
	if err != nil {
		w.ino.Close()
		return protocol.WatchStarted{}, err
	}
	return protocol.WatchStarted{Path: display(w.root), Dirs: len(w.dirs), Truncated: w.truncated}, nil
}

func (s *Server) dropWatch(id uint32) {
	s.mu.Lock()
	delete(s.watches, id)
	s.mu.Unlock()
}

// stopWatch is KindWatchStop.
func (s *Server) stopWatch(id uint32) {
	s.mu.Lock()
	w := s.watches[id]
	s.mu.Unlock()
	if w != nil {
		w.halt()
	}
}

// halt ends the watch (once): the reader's read fails, the sender sends
// what is queued and the end.
func (w *fileWatch) halt() {
	w.stopOnce.Do(func() { close(w.stop) })
}

// addTree watches the directory dfd (rel) and, recursive, every
// directory below it; announce queues a create event for each entry found
// below (a directory made with its contents before it was watched). Call
// it on a workspace thread.
func (w *fileWatch) addTree(dfd int, rel string, announce bool) error {
	if len(w.dirs) >= protocol.MaxWatchDirs {
		w.truncated = true
		return nil
	}
	wd, err := w.inotify(func(ifd int) (int, error) {
		return unix.InotifyAddWatch(ifd, "/proc/self/fd/"+strconv.Itoa(dfd), watchMask)
	})
	if err != nil {
		if errors.Is(err, unix.ENOSPC) { // the kernel's max_user_watches
			w.truncated = true
			return nil
		}
		return errnoError(err, display(rel))
	}
	w.dirs[int32(wd)] = rel
	if !w.recursive {
		return nil
	}
	dup, err := unix.Dup(dfd)
	if err != nil {
		return nil
	}
	unix.CloseOnExec(dup)
	d := os.NewFile(uintptr(dup), rel)
	names, _ := d.Readdirnames(protocol.MaxWalkDirEntries)
	d.Close()
	for _, name := range names {
		var st unix.Stat_t
		if unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			continue
		}
		isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
		child := path.Join(rel, name)
		if announce {
			w.enqueue(protocol.WatchEvent{Type: protocol.EventCreate, Path: display(child), Dir: isDir, Time: time.Now().UTC()})
		}
		if !isDir {
			continue
		}
		cfd, err := unix.Openat2(dfd, name, &unix.OpenHow{
			Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
			Resolve: resolveFlags | unix.RESOLVE_NO_SYMLINKS,
		})
		if err != nil {
			continue // a mount, or unreadable to the user: not watched
		}
		err = w.addTree(cfd, child, announce)
		unix.Close(cfd)
		if err != nil {
			return err
		}
	}
	return nil
}

// inotify runs fn on the inotify descriptor, which cannot be closed
// meanwhile (File.Fd would make it blocking: its reads could not be ended).
func (w *fileWatch) inotify(fn func(ifd int) (int, error)) (int, error) {
	rc, err := w.ino.SyscallConn()
	if err != nil {
		return -1, err
	}
	n, ferr := -1, error(nil)
	if err := rc.Control(func(fd uintptr) { n, ferr = fn(int(fd)) }); err != nil {
		return -1, err
	}
	return n, ferr
}

// enqueue queues an event unless the queue is full or the rate spent,
// which drops and counts it. A modify right after one of the same path
// is the same event.
func (w *fileWatch) enqueue(ev protocol.WatchEvent) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	if n := len(w.queue); n > 0 && ev.Type == protocol.EventModify && w.queue[n-1].Type == ev.Type && w.queue[n-1].Path == ev.Path {
		return
	}
	now := time.Now()
	w.tokens = min(w.tokens+now.Sub(w.refill).Seconds()*protocol.WatchRate, protocol.WatchQueue)
	w.refill = now
	if w.tokens < 1 || len(w.queue) >= protocol.WatchQueue {
		w.dropped++
	} else {
		w.tokens--
		w.queue = append(w.queue, ev)
	}
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// read turns inotify's events into the watch's until it is stopped or
// its directory goes.
func (w *fileWatch) read() {
	go func() { <-w.stop; w.ino.Close() }()
	buf := make([]byte, 64<<10)
	for {
		n, err := w.ino.Read(buf)
		if err != nil {
			break
		}
		if w.events(buf[:n]) {
			break
		}
	}
	w.halt()
	w.mu.Lock()
	if w.end == "" {
		w.end = protocol.WatchStopped
	}
	w.closed = true
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// inotifyEvent is one event of a read.
type inotifyEvent struct {
	wd     int32
	mask   uint32
	cookie uint32
	name   string
}

// parseEvents splits a read of the inotify descriptor.
func parseEvents(b []byte) []inotifyEvent {
	var out []inotifyEvent
	for len(b) >= unix.SizeofInotifyEvent {
		n := int(binary.NativeEndian.Uint32(b[12:16]))
		if unix.SizeofInotifyEvent+n > len(b) {
			break
		}
		out = append(out, inotifyEvent{wd: int32(binary.NativeEndian.Uint32(b[0:4])), mask: binary.NativeEndian.Uint32(b[4:8]),
			cookie: binary.NativeEndian.Uint32(b[8:12]), name: strings.TrimRight(string(b[unix.SizeofInotifyEvent:unix.SizeofInotifyEvent+n]), "\x00")})
		b = b[unix.SizeofInotifyEvent+n:]
	}
	return out
}

// events handles one read's events; true when the watch must end (its
// directory was deleted, moved or unmounted). A rename's IN_MOVED_FROM
// and IN_MOVED_TO come one after the other: paired, they are a move; an
// IN_MOVED_FROM alone left the watched tree (a delete), an IN_MOVED_TO
// alone came into it (a create).
func (w *fileWatch) events(b []byte) bool {
	now := time.Now().UTC()
	evs := parseEvents(b)
	for i := 0; i < len(evs); i++ {
		ev := evs[i]
		if ev.mask&unix.IN_Q_OVERFLOW != 0 {
			w.enqueue(protocol.WatchEvent{Type: protocol.EventOverflow, Time: now})
			continue
		}
		dir, ok := w.dirs[ev.wd]
		if !ok {
			continue
		}
		if ev.mask&unix.IN_IGNORED != 0 {
			delete(w.dirs, ev.wd)
			if dir == w.root {
				w.setEnd(protocol.WatchDeleted)
				return true
			}
			continue
		}
		if ev.mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_UNMOUNT) != 0 {
			if dir == w.root {
				w.setEnd(protocol.WatchDeleted)
				return true
			}
			continue // its parent reports it
		}
		p := path.Join(dir, ev.name)
		isDir := ev.mask&unix.IN_ISDIR != 0
		switch {
		case ev.mask&unix.IN_CREATE != 0:
			w.created(p, isDir, now)
		case ev.mask&unix.IN_MODIFY != 0:
			w.enqueue(protocol.WatchEvent{Type: protocol.EventModify, Path: display(p), Time: now})
		case ev.mask&unix.IN_DELETE != 0:
			w.enqueue(protocol.WatchEvent{Type: protocol.EventDelete, Path: display(p), Dir: isDir, Time: now})
		case ev.mask&unix.IN_MOVED_FROM != 0:
			if i+1 < len(evs) && evs[i+1].mask&unix.IN_MOVED_TO != 0 && evs[i+1].cookie == ev.cookie {
				if toDir, ok := w.dirs[evs[i+1].wd]; ok {
					i++
					to := path.Join(toDir, evs[i].name)
					w.enqueue(protocol.WatchEvent{Type: protocol.EventMove, Path: display(to), From: display(p), Dir: isDir, Time: now})
					if isDir {
						w.renameDirs(p, to)
					}
					continue
				}
			}
			w.enqueue(protocol.WatchEvent{Type: protocol.EventDelete, Path: display(p), Dir: isDir, Time: now})
			if isDir {
				w.forgetDirs(p)
			}
		case ev.mask&unix.IN_MOVED_TO != 0:
			w.created(p, isDir, now)
		}
	}
	return false
}

// created reports a new entry (made, or moved in) and watches it when it
// is a directory below a recursive watch.
func (w *fileWatch) created(p string, isDir bool, now time.Time) {
	w.enqueue(protocol.WatchEvent{Type: protocol.EventCreate, Path: display(p), Dir: isDir, Time: now})
	if isDir && w.recursive {
		w.watchNew(p)
	}
}

func (w *fileWatch) setEnd(reason string) {
	w.mu.Lock()
	w.end = reason
	w.mu.Unlock()
}

// watchNew watches a directory made (or moved in) below a recursive
// watch, and announces what it already holds.
func (w *fileWatch) watchNew(rel string) {
	before := len(w.dirs)
	w.s.ws.as(func() error {
		dfd, err := w.s.ws.open(rel, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
		if err != nil {
			return nil // gone already, or unreadable: its parent's events still come
		}
		defer unix.Close(dfd)
		return w.addTree(dfd, rel, true)
	})
	if len(w.dirs) == before && w.truncated {
		w.mu.Lock()
		w.dropped++ // its events will be missing
		w.mu.Unlock()
	}
}

// renameDirs updates the watched directories below a directory moved
// within the tree.
func (w *fileWatch) renameDirs(from, to string) {
	for wd, d := range w.dirs {
		if d == from || strings.HasPrefix(d, from+"/") {
			w.dirs[wd] = to + strings.TrimPrefix(d, from)
		}
	}
}

// forgetDirs stops watching a directory moved out of the tree.
func (w *fileWatch) forgetDirs(rel string) {
	for wd, d := range w.dirs {
		if d == rel || strings.HasPrefix(d, rel+"/") {
			w.inotify(func(ifd int) (int, error) { return unix.InotifyRmWatch(ifd, uint32(wd)) })
			delete(w.dirs, wd)
		}
	}
}

// send sends the queued events in batches (an overflow event after
// them when some were dropped), then the end.
func (w *fileWatch) send(ctx context.Context) {
	defer w.s.dropWatch(w.stream)
	stop := context.AfterFunc(ctx, w.halt)
	defer stop()
	for {
		<-w.wake
		for {
			w.mu.Lock()
			n, size := 0, 0
			for n < len(w.queue) && n < protocol.WatchBatchMax && size < watchFrameBytes {
				size += len(w.queue[n].Path) + len(w.queue[n].From) + 128
				n++
			}
			batch := append([]protocol.WatchEvent(nil), w.queue[:n]...)
			w.queue = append(w.queue[:0], w.queue[n:]...)
			if len(w.queue) == 0 && w.dropped > 0 {
				batch = append(batch, protocol.WatchEvent{Type: protocol.EventOverflow, Dropped: w.dropped, Time: time.Now().UTC()})
				w.dropped = 0
			}
			closed, end, more := w.closed, w.end, len(w.queue) > 0
			w.mu.Unlock()
			if len(batch) > 0 && w.s.sendJSON(protocol.KindWatchEvents, w.stream, protocol.WatchBatch{Events: batch}) != nil {
				w.halt()
				return
			}
			if more {
				continue
			}
			if closed {
				w.s.sendJSON(protocol.KindDataEnd, w.stream, protocol.WatchEnd{Reason: end})
				return
			}
			break
		}
	}
}
