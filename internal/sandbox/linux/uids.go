package linux

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Default host identity range: one host uid (and the gid of the same
// number) per live computer, far above what useradd hands out (users from
// 1000, /etc/subuid ranges from 100000 in steps of 65536).
const (
	DefaultUIDStart = 1879048192 // 0x70000000
	DefaultUIDCount = 65536
)

// ErrUIDRange reports a host uid range that cannot be used.
var ErrUIDRange = errors.New("host uid range")

// hostIDs hands out one host uid per live computer from [start,
// start+count). A uid is taken by holding an flock on <state>/uids/<uid>
// for the computer's life (so two processes on one state directory never
// share one, and a killed owner frees its uids), and the file names the
// computer: while that computer's directory still exists (a dead owner's
// computer not yet collected by GC, or a kept one), its uid stays taken.
type hostIDs struct {
	dir, computers string
	start, count   uint32
	next           atomic.Uint32
}

func newHostIDs(state string, start, count uint32) (*hostIDs, error) {
	if start == 0 && count == 0 {
		start, count = DefaultUIDStart, DefaultUIDCount
	}
	if err := checkIDRange(start, count); err != nil {
		return nil, err
	}
	h := &hostIDs{dir: filepath.Join(state, "uids"), computers: filepath.Join(state, "computers"), start: start, count: count}
	if err := os.MkdirAll(h.dir, 0o700); err != nil {
		return nil, fmt.Errorf("create uid directory: %w", err)
	}
	return h, nil
}

// hostID is one taken uid; release frees it.
type hostID struct {
	uid  uint32
	lock *os.File
}

// take reserves a free uid for computer id.
func (h *hostIDs) take(id string) (hostID, error) {
	for i := uint32(0); i < h.count; i++ {
		uid := h.start + (h.next.Add(1)-1)%h.count
		f, err := os.OpenFile(filepath.Join(h.dir, strconv.FormatUint(uint64(uid), 10)), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return hostID{}, fmt.Errorf("host uid: %w", err)
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil || h.stale(f) {
			f.Close()
			continue
		}
		if err := f.Truncate(0); err == nil {
			_, err = f.WriteAt([]byte(id), 0)
		}
		if err != nil {
			f.Close()
			return hostID{}, fmt.Errorf("host uid: %w", err)
		}
		return hostID{uid: uid, lock: f}, nil
	}
	return hostID{}, fmt.Errorf("every host uid of the range %d:%d is in use", h.start, h.count)
}

// stale reports whether the uid file names a computer whose directory
// still exists.
func (h *hostIDs) stale(f *os.File) bool {
	b := make([]byte, 64)
	n, _ := f.ReadAt(b, 0)
	id := string(b[:n])
	if id == "" || strings.ContainsAny(id, "/.") {
		return false
	}
	_, err := os.Lstat(filepath.Join(h.computers, id))
	return err == nil
}

// release frees the uid; forget says the computer's directory is gone, so
// the uid may be handed out again at once.
func (id *hostID) release(forget bool) {
	if id.lock == nil {
		return
	}
	if forget {
		id.lock.Truncate(0)
	}
	id.lock.Close()
	id.lock = nil
}

// checkIDRange refuses a range that holds uid 0, the overflow ids or an
// identity the host already uses: a user or group (/etc/passwd,
// /etc/group) or a subordinate range (/etc/subuid, /etc/subgid).
func checkIDRange(start, count uint32) error {
	end := uint64(start) + uint64(count) // exclusive
	switch {
	case count == 0:
		return fmt.Errorf("%w %d:%d: the count must be at least 1", ErrUIDRange, start, count)
	case start == 0 || end > 1<<32-1:
		return fmt.Errorf("%w %d:%d: must lie within 1..4294967294", ErrUIDRange, start, count)
	case uint64(start) <= 65534 && end > 65534:
		return fmt.Errorf("%w %d:%d holds the overflow id 65534", ErrUIDRange, start, count)
	}
	in := func(id uint64) bool { return id >= uint64(start) && id < end }
	for _, f := range []struct {
		path string
		col  int
	}{{"/etc/passwd", 2}, {"/etc/group", 2}} {
		for _, fields := range readColon(f.path) {
			if len(fields) > f.col {
				if id, err := strconv.ParseUint(fields[f.col], 10, 32); err == nil && in(id) {
					return fmt.Errorf("%w %d:%d holds id %d of %q in %s", ErrUIDRange, start, count, id, fields[0], f.path)
				}
			}
		}
	}
	for _, path := range []string{"/etc/subuid", "/etc/subgid"} {
		for _, fields := range readColon(path) {
			if len(fields) < 3 {
				continue
			}
			s, err1 := strconv.ParseUint(fields[1], 10, 32)
			n, err2 := strconv.ParseUint(fields[2], 10, 32)
			if err1 == nil && err2 == nil && s < end && s+n > uint64(start) {
				return fmt.Errorf("%w %d:%d overlaps %s's range %d:%d in %s", ErrUIDRange, start, count, fields[0], s, n, path)
			}
		}
	}
	return nil
}

// readColon returns the colon-separated fields of each line of path (none
// when it does not exist).
func readColon(path string) [][]string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out [][]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, strings.Split(line, ":"))
		}
	}
	return out
}
