package agent

import (
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
)

// outPipe is the read end of a process's output (a pipe, or a terminal's
// master) that a pump drains. Once the main process exited, what the pipe
// held at that moment is still delivered whole, however slowly the host
// reads it (the process wrote it before it ended); after that the pump
// reads for at most outputGrace more, for descendants that hold the pipe,
// and stops, so a background process cannot hold a command open.
type outPipe struct {
	f        *os.File
	coalesce bool // a non-blocking pipe: gather reads (gather)

	mu       sync.Mutex
	exited   bool // the main process exited (mainExited)
	measured bool // the pump took the backlog's size after that
	// noDeadline: f has no read deadlines (not pollable); it is then
	// closed after outputGrace, as before deadlines were used.
	noDeadline bool
	// deadline is f's read deadline (Unix nanoseconds, 0 for none): a
	// splice, which does not wait on f, checks it (spliceable).
	deadline atomic.Int64
}

// setDeadline sets f's read deadline (the zero time: none).
func (o *outPipe) setDeadline(t time.Time) error {
	if t.IsZero() {
		o.deadline.Store(0)
	} else {
		o.deadline.Store(t.UnixNano())
	}
	return o.f.SetReadDeadline(t)
}

// pastDeadline says whether f's read deadline has passed.
func (o *outPipe) pastDeadline() bool {
	d := o.deadline.Load()
	return d != 0 && time.Now().UnixNano() >= d
}

// newOutPipe wraps f; grow makes a pipe hold protocol.OutputChunk bytes
// (from 64 KiB), so that a fast writer fills it while the last chunk
// travels and the next read takes a whole frame's worth. Growing is best
// effort: a pipe that keeps its size (pipe-max-size, the user's pipe
// quota) works as before.
func newOutPipe(f *os.File, grow bool) *outPipe {
	if grow {
		if sc, err := f.SyscallConn(); err == nil {
			sc.Control(func(fd uintptr) { unix.FcntlInt(fd, unix.F_SETPIPE_SZ, protocol.OutputChunk) })
		}
	}
	return &outPipe{f: f, coalesce: grow}
}

// coalesceWindow is how long a pump waits, after the first byte, for more
// output to fill its frame: a fast writer's many small writes then travel
// as a few large frames (a frame's cost is mostly per frame: wake-ups,
// system calls, an event), while a slow writer's line is at most this
// late.
const coalesceWindow = time.Millisecond

// settleTick is how long the pump first sleeps while the pipe fills a
// frame: it wakes once a tick, not once for each of the writer's writes
// (which, for a writer of 4 KiB writes, was most of the agent's CPU), and
// stops as soon as a tick brought nothing.
const settleTick = 200 * time.Microsecond

// settle waits, up to coalesceWindow after first, while the pipe fills
// towards room more bytes, and returns how many of them it holds (at
// most room): it stops when they are there, when a sleep brought nothing
// (the writer paused or ended) or when the window is over. After the
// first tick it sleeps as long as the writer, at the rate it went, takes
// to fill the rest: a fast writer's frame takes two wake-ups. It reads
// nothing.
func (o *outPipe) settle(room int, first time.Time) int {
	if !o.coalesce {
		return 0
	}
	end, held, last, tick := first.Add(coalesceWindow), pipeHolds(o.f), time.Now(), settleTick
	for held < room {
		left := time.Until(end)
		if left <= 0 {
			break
		}
		if held == 0 {
			// The pipe is empty: the writer may have ended (a command
			// that printed a line and exited), which a sleep would not
			// see; look every hangupTick.
			if o.waitHeld(min(left, tick)) {
				break
			}
		} else {
			time.Sleep(min(left, tick))
		}
		now, at := pipeHolds(o.f), time.Now()
		if now <= held {
			break
		}
		perByte := float64(at.Sub(last)) / float64(now-held)
		tick = max(settleTick/4, time.Duration(perByte*float64(room-now)))
		held, last = now, at
	}
	return min(held, room)
}

// hangupTick is how often settle looks whether the writers of an empty
// pipe are gone.
const hangupTick = 50 * time.Microsecond

// waitHeld sleeps up to d while the pipe is empty, and reports whether
// its writers are gone (then it returns at once: nothing more can come).
func (o *outPipe) waitHeld(d time.Duration) (ended bool) {
	sc, err := o.f.SyscallConn()
	if err != nil {
		time.Sleep(d)
		return false
	}
	for waited := time.Duration(0); waited < d && pipeHolds(o.f) == 0; waited += hangupTick {
		sc.Control(func(fd uintptr) {
			p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			// A zero timeout: it never blocks the agent's thread.
			if n, _ := unix.Poll(p, 0); n > 0 && p[0].Revents&unix.POLLHUP != 0 && p[0].Revents&unix.POLLIN == 0 {
				ended = true
			}
		})
		if ended {
			return true
		}
		time.Sleep(hangupTick)
	}
	return false
}

// drain reads what the pipe holds into buf without waiting, until buf is
// full, the pipe is empty, or at its end or an error (which the next Read
// sees again). It returns the bytes read.
func (o *outPipe) drain(buf []byte) int {
	sc, err := o.f.SyscallConn()
	if err != nil {
		return 0
	}
	total := 0
	sc.Control(func(fd uintptr) {
		for total < len(buf) {
			k, err := unix.Read(int(fd), buf[total:])
			if k <= 0 {
				if err == unix.EINTR {
					continue
				}
				return // empty (EAGAIN), the end, or an error
			}
			total += k
		}
	})
	return total
}

// mainExited starts the end of the drain: reads stop outputGrace from
// now, unless the pump finds a backlog first (backlog).
func (o *outPipe) mainExited() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.exited = true
	if !o.measured && o.setDeadline(time.Now().Add(outputGrace)) != nil {
		o.noDeadline = true
	}
}

// backlog is, once after the main process exited, how many bytes the
// pipe holds: the pump reads them without a deadline. 0 otherwise.
func (o *outPipe) backlog() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.exited || o.measured || o.noDeadline {
		return 0
	}
	o.measured = true
	n := 0
	if sc, err := o.f.SyscallConn(); err == nil {
		sc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.TIOCINQ) }) // FIONREAD
	}
	if n > 0 {
		o.setDeadline(time.Time{})
	}
	return n
}

// output is where a pump's frames go (outputTo): frame takes one read
// into memory, after room for its header (protocol.HeaderRoom), so it
// goes out as it was read, without a copy; splice, when not nil, sends a
// frame of what was read (the same shape, possibly only the header's
// room) followed by the next n bytes of the pipe, which it does not read
// (spliceFrame). Each reports false when the output can go nowhere any
// more.
type output struct {
	frame  func(frame []byte) bool
	splice func(frame []byte, pipe *os.File, n int) bool
}

// pump forwards one output pipe to out (outputTo). Backpressure is end to
// end: when the host reads slowly, the agent's write blocks and so does the
// process, so neither side buffers more than a frame. A background
// process's ring never blocks: it drops its oldest bytes. A frame takes
// up to protocol.OutputChunk: whatever the pipe holds and what comes
// within coalesceWindow of the first byte (settle); when that is
// spliceMin or more, what the pipe holds is spliced, not read.
func (s *Server) pump(wg *sync.WaitGroup, out output, o *outPipe) {
	defer wg.Done()
	frame := make([]byte, protocol.HeaderRoom+protocol.OutputChunk)
	buf := frame[protocol.HeaderRoom:]
	remaining := 0 // of the backlog
	for {
		if remaining == 0 {
			remaining = o.backlog()
		}
		var (
			n       int
			err     error
			spliced bool
		)
		// The first bytes: already in the pipe (then nothing is read
		// yet), or waited for by a read, which the read deadlines end.
		if !o.coalesce || o.pastDeadline() || pipeHolds(o.f) == 0 {
			n, err = o.f.Read(buf)
		}
		if err == nil && o.coalesce && n < len(buf) {
			more := o.settle(len(buf)-n, time.Now())
			switch {
			case more >= spliceMin && out.splice != nil && s.splice.usable():
				if !out.splice(frame[:protocol.HeaderRoom+n], o.f, more) {
					return
				}
				n, spliced = n+more, true
			case more > 0:
				n += o.drain(buf[n:])
			}
		}
		if n > 0 && !spliced && !out.frame(frame[:protocol.HeaderRoom+n]) {
			return
		}
		if n > 0 && remaining > 0 {
			if remaining -= n; remaining <= 0 {
				remaining = -1 // drained: the grace for descendants runs from here
				o.setDeadline(time.Now().Add(outputGrace))
			}
		}
		if err != nil {
			return
		}
	}
}

// awaitPumps waits, once the main process exited, for the pumps to reach
// the end of their pipes or to stop after draining (outPipe).
func awaitPumps(pumps *sync.WaitGroup, outputs ...*outPipe) {
	for _, o := range outputs {
		o.mainExited()
	}
	done := make(chan struct{})
	go func() { pumps.Wait(); close(done) }()
	select {
	case <-done:
		return
	case <-time.After(outputGrace):
	}
	for _, o := range outputs {
		o.mu.Lock()
		if o.noDeadline {
			o.f.Close()
		}
		o.mu.Unlock()
	}
	<-done
}
