package agent

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
)

// File leases. A process in the computer may hold a lease on its own file
// (fcntl F_SETLEASE); opening that file for reading or writing then has to
// wait until the holder lets go or the kernel breaks the lease
// (fs.lease-break-time, 45 s by default). The agent opens with O_NONBLOCK,
// which starts the break and fails at once with EAGAIN; it retries a few
// times with sleeps between (no worker thread held while it sleeps, so the
// computer's other file calls go on), then gives up with ErrLocked.
const (
	leaseWait      = 2 * time.Second
	leaseFirstWait = 10 * time.Millisecond
	leaseMaxWait   = 250 * time.Millisecond
	// maxLookupRetries bounds the immediate retries of a lookup that raced a
	// concurrent rename (openat2 with RESOLVE_BENEATH answers EAGAIN then).
	maxLookupRetries = 64
)

// lockedError is the error of an open that a lease refused.
func lockedError(p string) error {
	return fmt.Errorf("%s: %w", p, protocol.ErrLocked)
}

// lookupRacedError is the error of a lookup that kept racing renames.
func lookupRacedError(p string) error {
	return protocol.WithMessage(protocol.ErrLocked, p+": files in the computer were renamed too often to look the path up; try again later")
}

// leased tells, after an open of r with flags failed with EAGAIN, whether a
// lease refused it: an O_PATH open never breaks a lease, so if the path
// resolves that way the EAGAIN came from the lease, not from the lookup.
func (ws *workspace) leased(r string, flags uint64) bool {
	if flags&unix.O_PATH != 0 {
		return false
	}
	fd, err := unix.Openat2(int(ws.root.Fd()), r, &unix.OpenHow{
		Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: resolveFlags,
	})
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// asUnlocked runs fn on a user-identity thread like as, and while fn fails
// with ErrLocked, runs it again after a sleep, for at most leaseWait. fn
// must be safe to repeat.
func (ws *workspace) asUnlocked(fn func() error) error {
	deadline := time.Now().Add(leaseWait)
	wait := leaseFirstWait
	for {
		err := ws.as(fn)
		if !errors.Is(err, protocol.ErrLocked) || time.Now().Add(wait).After(deadline) {
			return err
		}
		time.Sleep(wait)
		wait = min(2*wait, leaseMaxWait)
	}
}

// readLease takes a read lease on fd (open read-only), so that no process
// can open the file for writing or truncate it while the lease is held:
// their open waits until it is released (at most fs.lease-break-time). A
// file open for writing already is refused with ErrChanging. Where leases
// cannot be taken (a file the sandbox user does not own, a filesystem
// without leases) it reports false and the caller checks for changes
// afterwards instead. Call it on a worker thread: the lease needs the
// user's filesystem uid.
func readLease(fd int, p string) (bool, error) {
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETLEASE, unix.F_RDLCK); err != nil {
		if err == unix.EAGAIN || err == unix.EBUSY {
			return false, fmt.Errorf("%s: %w", p, protocol.ErrChanging)
		}
		return false, nil
	}
	return true, nil
}

// changedSince reports whether f was modified since before was taken, and
// its size now. A read lease still held at the end proves it was not: a
// writer waiting on it has not written yet.
func changedSince(f *os.File, before *unix.Stat_t, leased bool) (bool, int64) {
	var now unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &now); err != nil {
		return true, 0
	}
	if leased {
		if t, err := unix.FcntlInt(f.Fd(), unix.F_GETLEASE, 0); err == nil && t == unix.F_RDLCK {
			return false, now.Size
		}
	}
	return now.Size != before.Size || now.Mtim != before.Mtim || now.Ctim != before.Ctim, now.Size
}
