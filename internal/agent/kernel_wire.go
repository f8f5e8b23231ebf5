package agent

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
	"github.com/cubicle-sandbox/cubicle/internal/kernel"
)

// A Jupyter message can be far larger than a frame (a PNG display is
// several MB), so KindKernelMessage carries a message in chunks, in both
// directions. Each frame's payload is one flag byte (chunkMore when more
// chunks of the same message follow) and a piece of the message's body;
// the first piece starts with the body's length (uint32), so a receiver
// refuses an oversized message at its first frame and never holds more
// than the announced (and bounded) length. Chunks of one message are never
// interleaved with another message's on the same stream.
//
// The body: channel (1 byte, see channelCodes), the number of parts
// (uint32: header, parent_header, metadata, content, then the buffers),
// and each part as its length (uint32) and bytes. JSON parts travel as
// they are; buffers stay binary (no base64).

// maxKernelParts bounds the parts of a relayed message (the kernel client's
// frame limit is 1024, of which 6 are not parts).
const maxKernelParts = 1024

const chunkMore = 1

// ErrKernelMessageTooLarge reports a Jupyter message over MaxKernelMessage.
var ErrKernelMessageTooLarge = errors.New("Jupyter message too large")

var channelCodes = []string{1: protocol.ChannelShell, 2: protocol.ChannelIOPub, 3: protocol.ChannelStdin, 4: protocol.ChannelControl}

func channelCode(ch string) byte {
	for i, c := range channelCodes {
		if c == ch && c != "" {
			return byte(i)
		}
	}
	return 0
}

// messageSize is what MaxKernelMessage bounds.
func messageSize(m *protocol.KernelMessage) int64 {
	return toRaw(m).Size()
}

func toRaw(m *protocol.KernelMessage) *kernel.RawMessage {
	return &kernel.RawMessage{Channel: m.Channel, Header: m.Header, ParentHeader: m.ParentHeader, Metadata: m.Metadata, Content: m.Content, Buffers: m.Buffers}
}

func fromRaw(r kernel.RawMessage) protocol.KernelMessage {
	return protocol.KernelMessage{Channel: r.Channel, Header: r.Header, ParentHeader: r.ParentHeader, Metadata: r.Metadata, Content: r.Content, Buffers: r.Buffers}
}

// ValidateKernelMessage checks a relayed message's shape: a known channel,
// a header with msg_id and msg_type strings, JSON objects for the other
// parts, at most MaxKernelMessage bytes and maxKernelParts parts.
func ValidateKernelMessage(m *protocol.KernelMessage) error {
	if n := messageSize(m); n > protocol.MaxKernelMessage {
		return fmt.Errorf("%w: %w: %d bytes; the limit is %d", protocol.ErrInvalid, ErrKernelMessageTooLarge, n, protocol.MaxKernelMessage)
	}
	if len(m.Buffers) > maxKernelParts-4 {
		return fmt.Errorf("%w: a Jupyter message with %d buffers; the limit is %d", protocol.ErrInvalid, len(m.Buffers), maxKernelParts-4)
	}
	if err := kernel.ValidateRaw(toRaw(m)); err != nil {
		return fmt.Errorf("%w: %v", protocol.ErrInvalid, err)
	}
	return nil
}

// encodeKernelMessage returns the frame payloads of m, in order.
func encodeKernelMessage(m *protocol.KernelMessage) ([][]byte, error) {
	code := channelCode(m.Channel)
	if code == 0 {
		return nil, fmt.Errorf("%w: unknown channel %q", protocol.ErrInvalid, clipString(m.Channel, 40))
	}
	parts := append([][]byte{m.Header, m.ParentHeader, m.Metadata, m.Content}, m.Buffers...)
	size := 1 + 4
	for _, p := range parts {
		size += 4 + len(p)
	}
	// Written straight into the chunks: a big message is never copied whole
	// once more.
	var w chunkWriter
	var hdr [5]byte
	binary.BigEndian.PutUint32(hdr[:4], uint32(size))
	hdr[4] = code
	w.write(hdr[:])
	w.write(binary.BigEndian.AppendUint32(nil, uint32(len(parts))))
	for _, p := range parts {
		w.write(binary.BigEndian.AppendUint32(nil, uint32(len(p))))
		w.write(p)
	}
	return w.chunks, nil
}

// chunkWriter splits a body into frame payloads of at most MaxPayload
// bytes, each starting with its flag byte (chunkMore on all but the last).
type chunkWriter struct {
	chunks [][]byte
}

func (w *chunkWriter) write(p []byte) {
	for len(p) > 0 {
		n := len(w.chunks)
		if n == 0 || len(w.chunks[n-1]) == protocol.MaxPayload {
			if n > 0 {
				w.chunks[n-1][0] = chunkMore
			}
			w.chunks = append(w.chunks, append(make([]byte, 0, min(protocol.MaxPayload, 1+len(p))), 0))
			n++
		}
		c := w.chunks[n-1]
		k := min(len(p), protocol.MaxPayload-len(c))
		if len(c)+k > cap(c) { // grow only as far as the data goes
			nc := make([]byte, len(c), min(protocol.MaxPayload, max(2*cap(c), len(c)+k)))
			copy(nc, c)
			c = nc
		}
		w.chunks[n-1] = append(c, p[:k]...)
		p = p[k:]
	}
}

// assembler puts a message's chunks back together. limit bounds a body.
type assembler struct {
	limit int
	buf   []byte
	total int
	open  bool
}

// add takes one frame payload; it returns the message once its last chunk
// arrived. Any error leaves the assembler unusable for the stream.
func (a *assembler) add(p []byte) (*protocol.KernelMessage, error) {
	if len(p) < 1 {
		return nil, errors.New("empty Jupyter message chunk")
	}
	more, data := p[0]&chunkMore != 0, p[1:]
	if p[0]&^chunkMore != 0 {
		return nil, fmt.Errorf("Jupyter message chunk with flags 0x%02x", p[0])
	}
	if !a.open {
		if len(data) < 4 {
			return nil, errors.New("Jupyter message chunk without the message's length")
		}
		a.total = int(binary.BigEndian.Uint32(data))
		data = data[4:]
		if a.total > a.limit {
			return nil, fmt.Errorf("%w: a Jupyter message of %d bytes; the limit is %d", ErrKernelMessageTooLarge, a.total, a.limit)
		}
		a.open = true
		a.buf = make([]byte, 0, min(a.total, protocol.MaxPayload))
	}
	if len(a.buf)+len(data) > a.total {
		return nil, fmt.Errorf("Jupyter message chunks longer than the announced %d bytes", a.total)
	}
	a.buf = append(a.buf, data...)
	if more {
		if len(a.buf) == a.total {
			return nil, errors.New("Jupyter message chunk after the announced length")
		}
		return nil, nil
	}
	if len(a.buf) != a.total {
		return nil, fmt.Errorf("Jupyter message of %d bytes ended after %d", a.total, len(a.buf))
	}
	body := a.buf
	a.buf, a.open = nil, false
	return decodeKernelBody(body)
}

// decodeKernelBody parses a reassembled body. The parts alias body.
func decodeKernelBody(b []byte) (*protocol.KernelMessage, error) {
	bad := func(what string) (*protocol.KernelMessage, error) {
		return nil, fmt.Errorf("malformed Jupyter message: %s", what)
	}
	if len(b) < 5 {
		return bad("too short")
	}
	code, n := int(b[0]), binary.BigEndian.Uint32(b[1:5])
	if code == 0 || code >= len(channelCodes) {
		return bad(fmt.Sprintf("channel %d", code))
	}
	if n < 4 || n > maxKernelParts {
		return bad(fmt.Sprintf("%d parts", n))
	}
	b = b[5:]
	parts := make([][]byte, 0, n)
	for range n {
		if len(b) < 4 {
			return bad("truncated part length")
		}
		l := binary.BigEndian.Uint32(b)
		b = b[4:]
		if uint64(l) > uint64(len(b)) {
			return bad("part longer than the message")
		}
		parts = append(parts, b[:l:l])
		b = b[l:]
	}
	if len(b) != 0 {
		return bad("bytes after the last part")
	}
	m := &protocol.KernelMessage{Channel: channelCodes[code], Header: parts[0], ParentHeader: parts[1], Metadata: parts[2], Content: parts[3]}
	if len(parts) > 4 {
		m.Buffers = parts[4:]
	}
	return m, nil
}

// statusMessage is the iopub status a client sees when the relay (not the
// kernel) reports a state: "restarting" after a crash, "dead" at the end,
// shaped like jupyter_server's.
func statusMessage(session, state string) protocol.KernelMessage {
	var id [16]byte
	_, _ = rand.Read(id[:])
	h, _ := json.Marshal(map[string]string{
		"msg_id": hex.EncodeToString(id[:]), "msg_type": "status", "session": session,
		"username": "cubicle", "date": time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"), "version": "5.3",
	})
	c, _ := json.Marshal(map[string]string{"execution_state": state})
	return protocol.KernelMessage{Channel: protocol.ChannelIOPub, Header: h, ParentHeader: json.RawMessage("{}"), Metadata: json.RawMessage("{}"), Content: c}
}
