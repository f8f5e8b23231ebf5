package httpapi

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"strings"
	"unicode/utf8"
)

// binaryStream is the media type of exec's binary stream (docs/api.md,
// "The binary stream"): frames of type(1) length(4, big-endian) payload,
// the output's exact bytes without any encoding.
const binaryStream = "application/vnd.cubicle.stream"

// Frame types of the binary stream, by the SSE event they replace.
var binaryFrames = map[string]byte{"stdout": 1, "stderr": 2, "exit": 3, "error": 4}

// maxEventBuf is the largest event buffer an sse keeps for the next
// event: an exec's event holds at most maxEventData bytes of output,
// whose worst case as a JSON string (six bytes a byte) fits in it.
const maxEventBuf = 2 << 20

// wantsBinary says whether a request asks for the binary stream.
func wantsBinary(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), binaryStream)
}

// newBinaryStream is an sse that writes the binary stream instead: the
// same calls, frames instead of events.
func newBinaryStream(w http.ResponseWriter) *sse {
	s := newSSE(w)
	s.binary = true
	return s
}

// sendData sends output: an SSE event {"data": …} whose value is base64
// of data (b64) or data as a JSON string, or a binary frame of the bytes.
// The event is built in one reused buffer and written at once (no JSON
// encoder, no copies of the data but the one into the buffer); a binary
// frame is its header and then data itself, not copied. id, when not "",
// is the SSE event's id.
func (s *sse) sendData(event, id string, data []byte, b64 bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.start()
	if s.binary {
		var hdr [5]byte
		s.w.Write(appendFrameHeader(hdr[:0], binaryFrames[event], len(data)))
		s.w.Write(data)
		s.rc.Flush()
		return
	}
	b := s.buf[:0]
	if id != "" {
		b = append(append(append(b, "id: "...), id...), '\n')
	}
	b = append(append(append(b, "event: "...), event...), "\ndata: {\"data\":"...)
	if b64 {
		b = append(base64.StdEncoding.AppendEncode(append(b, '"'), data), '"')
	} else {
		b = appendJSONString(b, data)
	}
	b = append(b, "}\n\n"...)
	s.w.Write(b)
	s.rc.Flush()
	if cap(b) <= maxEventBuf {
		s.buf = b
	} else {
		s.buf = nil
	}
}

// sendFrame is send for the binary stream: v as JSON in a frame of
// event's type. Called with s.mu held.
func (s *sse) sendFrame(event string, v any) {
	j, _ := json.Marshal(v)
	s.w.Write(appendFrame(nil, binaryFrames[event], j))
	s.rc.Flush()
}

func appendFrame(b []byte, typ byte, payload []byte) []byte {
	return append(appendFrameHeader(b, typ, len(payload)), payload...)
}

// appendFrameHeader appends a binary frame's header: its type, and n, the
// length of the payload that follows.
func appendFrameHeader(b []byte, typ byte, n int) []byte {
	return binary.BigEndian.AppendUint32(append(b, typ), uint32(n))
}

// streamOut sends a process's output as stdout/stderr events. As text, a
// UTF-8 sequence cut between two reads is held back (at most 3 bytes per
// stream) until the rest comes, so it is never replaced by U+FFFD; what is
// still incomplete at the end is sent then (and shows as U+FFFD). Base64
// events and binary frames carry the bytes as they come.
type streamOut struct {
	sse    *sse
	base64 bool
	held   [2][]byte // stdout's, stderr's
}

func heldIndex(kind string) int {
	if kind == "stderr" {
		return 1
	}
	return 0
}

func (s *streamOut) write(kind string, data []byte) {
	if s.sse.binary {
		s.sse.sendData(kind, "", data, false)
		return
	}
	if s.base64 {
		s.send(kind, data)
		return
	}
	i, buf := heldIndex(kind), data
	if len(s.held[i]) > 0 {
		buf = append(s.held[i], data...)
	}
	n := completeUTF8(buf)
	s.held[i] = nil
	if n < len(buf) {
		s.held[i] = append([]byte(nil), buf[n:]...)
	}
	if n > 0 {
		s.send(kind, buf[:n])
	}
}

// maxEventData is the most output one SSE event carries: a frame (up to
// protocol.OutputChunk) is sent as events of at most this much, so an
// event stays small for every client's parser (six bytes a byte as an
// escaped JSON string: 1.5 MiB at most).
const maxEventData = 256 << 10

// send sends data as events of at most maxEventData bytes each, as text
// cut between UTF-8 sequences, as base64 at a multiple of 3 bytes (each
// event's value decodes on its own).
func (s *streamOut) send(kind string, data []byte) {
	for len(data) > 0 {
		n := min(len(data), maxEventData)
		if s.base64 && n < len(data) {
			n -= n % 3
		} else if n < len(data) {
			n = max(completeUTF8(data[:n]), 1)
		}
		s.sse.sendData(kind, "", data[:n], s.base64)
		data = data[n:]
	}
}

// flush sends what is held back, in a fixed order.
func (s *streamOut) flush() {
	for i, kind := range []string{"stdout", "stderr"} {
		if b := s.held[i]; len(b) > 0 {
			s.held[i] = nil
			s.send(kind, b)
		}
	}
}

// completeUTF8 is the length of b without a trailing UTF-8 sequence that
// is valid so far but incomplete (at most utf8.UTFMax-1 bytes).
func completeUTF8(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-(utf8.UTFMax-1); i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return i
			}
			break
		}
	}
	return len(b)
}
