package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

// MaxPayload bounds every frame in both directions, so a compromised or buggy
// peer can never make the other side allocate more than this per frame.
const MaxPayload = 1 << 20

// ChunkSize is how much file content (and other data) one data frame carries.
const ChunkSize = 32 << 10

// OutputChunk is the most process output one frame carries: the agent
// reads a process's pipes (made this large) up to this much at a time,
// so a fast writer's output travels in few large frames while a slow
// one's still goes out as soon as it is written.
const OutputChunk = 1 << 20

const headerSize = 9 // payload length (4), kind (1), stream id (4)

// Kind says what a frame carries.
type Kind uint8

// Frames from the host to the agent.
const (
	KindInit       Kind = iota + 1 // JSON Init: bootstrap configuration (first frame only)
	KindExec                       // JSON ExecStart
	KindStdin                      // raw bytes for a process's stdin
	KindStdinClose                 // close a process's stdin
	KindSignal                     // JSON SignalRequest
	KindFileWrite                  // JSON FileWrite, then KindData frames and KindDataEnd
	KindFileRead                   // JSON FileRead
	KindStat                       // JSON PathRequest
	KindList                       // JSON PathRequest
	KindMkdir                      // JSON PathRequest
	KindRemove                     // JSON PathRequest
	KindPing                       // empty
)

// Frames from the agent to the host.
const (
	KindReady    Kind = iota + 64 // JSON Ready: bootstrap finished
	KindStarted                   // JSON Started
	KindStdout                    // raw process output
	KindStderr                    // raw process output
	KindExit                      // JSON ExitStatus; last frame of a process
	KindStdinAck                  // empty: one stdin chunk was consumed
	KindOK                        // JSON reply of a request (shape depends on the request)
	KindError                     // JSON WireError; last frame of a request
	KindData                      // raw file content (both directions)
	KindDataEnd                   // JSON DataEnd (agent) or empty (host): end of file content
)

// ErrFrameTooLarge reports a frame whose announced payload exceeds MaxPayload.
var ErrFrameTooLarge = errors.New("control channel: frame too large")

// Frame is one message on the control channel.
type Frame struct {
	Kind    Kind
	ID      uint32
	Payload []byte
}

// ReadFrame reads one frame, refusing payloads over MaxPayload before
// allocating anything for them.
func ReadFrame(r io.Reader) (Frame, error) {
	var hdr [headerSize]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return Frame{}, err
	}
	n := binary.BigEndian.Uint32(hdr[0:4])
	if n > MaxPayload {
		return Frame{}, fmt.Errorf("%w: %d bytes", ErrFrameTooLarge, n)
	}
	f := Frame{Kind: Kind(hdr[4]), ID: binary.BigEndian.Uint32(hdr[5:9])}
	if n > 0 {
		f.Payload = payload(f.Kind, int(n))
		if _, err := io.ReadFull(r, f.Payload); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return Frame{}, fmt.Errorf("control channel: truncated frame: %w", err)
		}
	}
	return f, nil
}

// chunks and outputChunks hold the buffers of raw data frames (process
// output, file content) that their readers gave back with Recycle: a
// stream of any length then reuses a few buffers instead of leaving a
// chunk of garbage per frame (1 GiB of output would otherwise be 1 GiB for
// the garbage collector, and the heap grows with it whenever the collector
// falls behind).
var (
	chunks       = sync.Pool{New: func() any { return new([ChunkSize]byte) }}
	outputChunks = sync.Pool{New: func() any { return new([OutputChunk]byte) }}
)

// payload returns n bytes for a frame of kind k: a pooled chunk for raw
// data that fits one, fresh memory for everything else.
func payload(k Kind, n int) []byte {
	switch {
	case n <= ChunkSize && (k == KindStdout || k == KindStderr || k == KindData):
		return chunks.Get().(*[ChunkSize]byte)[:n]
	case n <= OutputChunk && (k == KindStdout || k == KindStderr):
		return outputChunks.Get().(*[OutputChunk]byte)[:n]
	}
	return make([]byte, n)
}

// Recycle gives a frame's payload back for reuse by ReadFrame. Call it only
// when nothing refers to the payload any more (an io.Writer that was given
// it has returned: Writers must not retain what they are given).
func Recycle(f Frame) {
	switch cap(f.Payload) {
	case ChunkSize:
		chunks.Put((*[ChunkSize]byte)(f.Payload[:ChunkSize]))
	case OutputChunk:
		outputChunks.Put((*[OutputChunk]byte)(f.Payload[:OutputChunk]))
	}
}

// AppendFrame encodes a frame into buf so it can go out in one write.
func AppendFrame(buf []byte, f Frame) ([]byte, error) {
	if len(f.Payload) > MaxPayload {
		return buf, fmt.Errorf("%w: %d bytes", ErrFrameTooLarge, len(f.Payload))
	}
	var hdr [HeaderRoom]byte
	putHeader(hdr[:], f.Kind, f.ID, len(f.Payload))
	buf = append(buf, hdr[:]...)
	return append(buf, f.Payload...), nil
}

// HeaderRoom is the room a frame's header takes before its payload (see
// FrameInPlace).
const HeaderRoom = headerSize

// FrameInPlace writes the header of a frame of kind and id into the first
// HeaderRoom bytes of b, whose payload is the rest: a sender that reads
// the payload into b[HeaderRoom:] writes b as it is, without a copy.
func FrameInPlace(b []byte, kind Kind, id uint32) error {
	n := len(b) - headerSize
	if n < 0 {
		return fmt.Errorf("%w: no room for the header", ErrInternal)
	}
	if n > MaxPayload {
		return fmt.Errorf("%w: %d bytes", ErrFrameTooLarge, n)
	}
	putHeader(b, kind, id, n)
	return nil
}

// putHeader writes into b[:HeaderRoom] the header of a frame of kind and
// id whose payload, n bytes (at most MaxPayload), follows it.
func putHeader(b []byte, kind Kind, id uint32, n int) {
	binary.BigEndian.PutUint32(b[0:4], uint32(n))
	b[4] = byte(kind)
	binary.BigEndian.PutUint32(b[5:9], id)
}
