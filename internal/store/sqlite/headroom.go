package sqlite

import (
	"context"
	"errors"
	"os"
	"sync"
	"syscall"

	sqlite3 "modernc.org/sqlite"
	sqlitelib "modernc.org/sqlite/lib"

	"github.com/cubicle-sandbox/cubicle/internal/log"
	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// HeadroomBytes is the space a database keeps reserved beside itself (a
// preallocated file, <db>.headroom) for the writes that must succeed on a
// full disk: deleting a file, recording a computer's stop, an audit event,
// revoking a key. SQLite needs a few pages of WAL for each; 16 MiB holds
// thousands of them.
const HeadroomBytes = 16 << 20

const headroomStep = 1 << 20

// headroom is the reserve file. release frees it when SQLite reports the
// disk full; restore grows it back (up to HeadroomBytes, as space allows)
// before the next write, so freed space goes to the reserve first.
type headroom struct {
	path string
	mu   sync.Mutex
	full bool // the reserve holds HeadroomBytes
}

func newHeadroom(dbPath string) *headroom {
	h := &headroom{path: dbPath + ".headroom"}
	if !h.restore() {
		log.From(context.Background()).Warn("the data directory's disk is too full to reserve headroom for deletes and stops",
			"want_bytes", HeadroomBytes, "path", h.path)
	}
	return h
}

// restore grows the reserve toward HeadroomBytes and reports whether it
// is complete.
func (h *headroom) restore() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.full {
		return true
	}
	f, err := os.OpenFile(h.path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	for off := fi.Size() / headroomStep * headroomStep; off < HeadroomBytes; off += headroomStep {
		if err := syscall.Fallocate(int(f.Fd()), 0, off, headroomStep); err != nil {
			return false
		}
	}
	h.full = true
	return true
}

// release frees the reserve; false if it held nothing.
func (h *headroom) release() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	fi, err := os.Stat(h.path)
	if err != nil || fi.Size() == 0 {
		return false
	}
	h.full = false
	if err := os.Truncate(h.path, 0); err != nil {
		return false
	}
	log.From(context.Background()).Warn("the data directory's disk is full: released the database's headroom for a delete or a stop", "path", h.path)
	return true
}

// isFull reports SQLite's "database or disk is full".
func isFull(err error) bool {
	var se *sqlite3.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlitelib.SQLITE_FULL
}

// dbErr turns a full disk into store.ErrFull.
func dbErr(err error) error {
	if isFull(err) {
		return store.FullError(err)
	}
	return store.Full(err)
}

// write runs an ordinary write: the reserve is restored first if it can
// be, and a full disk is store.ErrFull.
func (s *DB) write(fn func() error) error {
	s.room.restore()
	return dbErr(fn())
}

// mustWrite runs a write that a full disk must not stop: on SQLITE_FULL
// it releases the reserve and tries again, then restores what it can.
func (s *DB) mustWrite(fn func() error) error {
	s.room.restore()
	err := fn()
	if isFull(err) && s.room.release() {
		err = fn()
		s.room.restore()
	}
	return dbErr(err)
}
