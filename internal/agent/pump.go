package agent

import (
	"os"
	"sync"
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

// firstFrame is a pump's first frame size: a pipe's default capacity.
const firstFrame = 64 << 10

// coalesceWindow is how long a pump waits, after a read, for more output
// to fill its frame: a fast writer's many small writes then travel as a
// few large frames (a frame's cost is mostly per frame: wake-ups, system
// calls, an event), while a slow writer's line is at most this late.
const coalesceWindow = time.Millisecond

// gather reads more into buf, from a pipe, until it is full, the pipe is
// empty for coalesceWindow after first, or at its end or an error (which
// the next Read sees again). It returns the bytes read.
func (o *outPipe) gather(buf []byte, first time.Time) int {
	sc, err := o.f.SyscallConn()
	if !o.coalesce || err != nil {
		return 0
	}
	end, total := first.Add(coalesceWindow), 0
	sc.Control(func(fd uintptr) {
		for total < len(buf) {
			k, err := unix.Read(int(fd), buf[total:])
			if k > 0 {
				total += k
				continue
			}
			left := time.Until(end)
			if err != unix.EAGAIN || left <= 0 {
				return // the end, an error, or the window is over
			}
			unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int((left+time.Millisecond-1)/time.Millisecond))
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
	if !o.measured && o.f.SetReadDeadline(time.Now().Add(outputGrace)) != nil {
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
		o.f.SetReadDeadline(time.Time{})
	}
	return n
}

// pump forwards one output pipe to emit (outputTo). Backpressure is end to
// end: when the host reads slowly, the agent's write blocks and so does the
// process, so neither side buffers more than a frame. A background
// process's ring never blocks: it drops its oldest bytes. A frame takes
// up to protocol.OutputChunk: whatever the pipe holds and what comes
// within coalesceWindow of the first byte. It is read after room for its
// header (protocol.HeaderRoom) and goes out as it was read, not copied.
// The frame starts at firstFrame bytes and grows to a whole chunk once a
// frame filled it (a fast writer): most commands print little, and every
// exec starts two pumps.
func (s *Server) pump(wg *sync.WaitGroup, emit func(frame []byte) bool, o *outPipe) {
	defer wg.Done()
	frame := make([]byte, protocol.HeaderRoom+firstFrame)
	buf := frame[protocol.HeaderRoom:]
	remaining := 0 // of the backlog
	for {
		if remaining == 0 {
			remaining = o.backlog()
		}
		n, err := o.f.Read(buf)
		if n > 0 && err == nil && n < len(buf) {
			n += o.gather(buf[n:], time.Now())
		}
		if n > 0 {
			if !emit(frame[:protocol.HeaderRoom+n]) {
				return
			}
			if n == len(buf) && n < protocol.OutputChunk {
				frame = make([]byte, protocol.HeaderRoom+protocol.OutputChunk)
				buf = frame[protocol.HeaderRoom:]
			}
			if remaining > 0 {
				if remaining -= n; remaining <= 0 {
					remaining = -1 // drained: the grace for descendants runs from here
					o.f.SetReadDeadline(time.Now().Add(outputGrace))
				}
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
