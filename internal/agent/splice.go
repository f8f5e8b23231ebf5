package agent

import (
	"errors"
	"io"
	"os"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
)

// spliceMin is the least of a frame that must still be in the pipe, once
// the pump has let it fill (settle), for it to go to the host by
// splice(2) instead of a read and a write: a fast writer's output then
// moves from the pipe to the control channel as page references, never
// copied in the agent; a slow writer's few bytes are read.
const spliceMin = 64 << 10

// splicer moves output frames from a pipe straight into the control
// channel when the channel is a local socket (the Linux driver's
// socketpair); off, it does nothing (TLS to a pod, a test's conn).
type splicer struct {
	raw syscall.RawConn // the control channel's, nil when it has none
	off atomic.Bool     // splice(2) refused once: not tried again
}

func newSplicer(conn io.ReadWriter) *splicer {
	sp := &splicer{}
	if sc, ok := conn.(interface {
		SyscallConn() (syscall.RawConn, error)
	}); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			sp.raw = raw
		}
	}
	return sp
}

// pipeHolds is how many bytes a pipe holds (FIONREAD); 0 when unknown.
func pipeHolds(f *os.File) int {
	sc, err := f.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	sc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.TIOCINQ) })
	return n
}

// usable says whether frames may be spliced into the channel.
func (sp *splicer) usable() bool { return sp.raw != nil && !sp.off.Load() }

// spliceFrame sends a frame of kind and id whose payload is what frame
// holds after the room for its header (what was read, perhaps nothing)
// and then the next n bytes of pipe, which holds at least that many
// (settle): the header and what was read in one write, then the rest
// spliced from the pipe into the channel. Where the kernel refuses the
// splice before moving a byte, those bytes are read and written instead
// (and splicing is off from then on): the header already went. The pipe
// stays open throughout (a close waits), so a frame whose header went is
// always whole.
func (s *Server) spliceFrame(kind protocol.Kind, id uint32, frame []byte, pipe *os.File, n int) error {
	psc, err := pipe.SyscallConn()
	if err != nil {
		return err
	}
	if len(frame)-protocol.HeaderRoom+n > protocol.MaxPayload {
		return protocol.ErrFrameTooLarge
	}
	protocol.PutHeader(frame, kind, id, len(frame)-protocol.HeaderRoom+n)
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	var serr error
	cerr := psc.Control(func(pfd uintptr) {
		if _, serr = s.conn.Write(frame); serr != nil {
			return
		}
		left := n
		werr := s.splice.raw.Write(func(sfd uintptr) bool {
			for left > 0 {
				k, err := unix.Splice(int(pfd), nil, int(sfd), nil, left, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
				switch {
				case k > 0:
					left -= int(k)
				case err == unix.EINTR:
				case err == unix.EAGAIN: // the channel is full (the pipe holds the rest): wait for room
					return false
				case err == nil: // the pipe ended early: it cannot, as only this pump reads it
					serr = io.ErrUnexpectedEOF
					return true
				default:
					serr = err
					return true
				}
			}
			return true
		})
		if serr == nil {
			serr = werr
		}
		if left == n && (errors.Is(serr, unix.EINVAL) || errors.Is(serr, unix.ENOSYS) || errors.Is(serr, unix.EPERM)) {
			s.splice.off.Store(true)
			serr = s.copyFrame(int(pfd), n)
		}
	})
	if cerr != nil {
		return cerr // nothing sent: the pipe was closed
	}
	return serr
}

// copyFrame writes the next n bytes of the pipe fd to the channel (the
// payload of a frame whose header went): spliceFrame's fallback. The
// pipe holds them, so its reads do not wait.
func (s *Server) copyFrame(fd, n int) error {
	buf := make([]byte, n)
	for got := 0; got < n; {
		k, err := unix.Read(fd, buf[got:])
		switch {
		case k > 0:
			got += k
		case err == unix.EINTR:
		case err != nil:
			return err
		default:
			return io.ErrUnexpectedEOF
		}
	}
	_, err := s.conn.Write(buf)
	return err
}
