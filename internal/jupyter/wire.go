package jupyter

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/coder/websocket"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// The WebSocket carries one Jupyter message per frame, as jupyter_server
// does: a JSON text frame {header, msg_id, msg_type, parent_header,
// metadata, content, buffers, channel}, or, when the message has binary
// buffers, a binary frame in jupyter_server's format
// (serialize_binary_message): a big-endian uint32 count n of parts, n
// big-endian uint32 offsets from the frame's start, then the JSON part
// (without buffers) and the buffers.

// Bounds of what a client may send.
const (
	// maxClientMessage is the relay's bound on a message plus room for
	// the JSON envelope; the relay refuses what is over its own bound.
	maxClientMessage = sandbox.MaxKernelMessage + 64<<10
	maxBuffers       = 64
	maxMsgIDLen      = 256
	// maxHeader bounds a client message's header. The kernel echoes the
	// header as its replies' parent_header, re-encoded by Python's json
	// (", " and ": " separators, 1e15 written as 1000000000000000.0: at
	// most about 4.5 times the bytes), and the kernel wire takes a
	// parent_header over its own bound (internal/kernel's maxHeaderJSON,
	// 64 KiB) for a broken protocol and stops the kernel. 8 KiB keeps
	// every echo under that bound; clients send a few hundred bytes.
	maxHeader = 8 << 10
)

// The Jupyter channels the WebSocket carries.
const (
	chShell   = "shell"
	chControl = "control"
	chStdin   = "stdin"
	chIOPub   = "iopub"
)

var errBadMessage = errors.New("bad Jupyter message")

// clientMessage is the JSON part of a message from a client.
type clientMessage struct {
	Channel      string          `json:"channel"`
	Header       json.RawMessage `json:"header"`
	ParentHeader json.RawMessage `json:"parent_header"`
	Metadata     json.RawMessage `json:"metadata"`
	Content      json.RawMessage `json:"content"`
}

// header is what the gateway reads of a header.
type header struct {
	MsgID   string `json:"msg_id"`
	MsgType string `json:"msg_type"`
}

// clientFrame is one decoded message from a client.
type clientFrame struct {
	msg   sandbox.KernelMessage
	msgID string
	// noChannel: the message named no channel and goes to shell, as
	// jupyter_server sends it (GatewayKernelClient of jupyter_server 1.x
	// sends such messages).
	noChannel bool
	// refused says why the message must not reach the kernel (its header
	// is over maxHeader); the client is answered instead.
	refused string
}

// decodeClient parses one frame from a client into the message for the
// kernel. v1 is the v1.kernel.websocket.jupyter.org protocol, whose binary
// frames carry the channel and each part (decodeV1); otherwise a binary
// frame is jupyter_server's legacy format (splitBinary).
func decodeClient(typ websocket.MessageType, data []byte, v1 bool) (clientFrame, error) {
	var cm clientMessage
	var buffers [][]byte
	switch {
	case typ == websocket.MessageBinary && v1:
		var err error
		if cm, buffers, err = decodeV1(data); err != nil {
			return clientFrame{}, err
		}
	default:
		jsonPart := data
		if typ == websocket.MessageBinary {
			var err error
			if jsonPart, buffers, err = splitBinary(data); err != nil {
				return clientFrame{}, err
			}
		}
		if err := json.Unmarshal(jsonPart, &cm); err != nil {
			return clientFrame{}, fmt.Errorf("%w: %v", errBadMessage, err)
		}
	}
	f := clientFrame{noChannel: cm.Channel == ""}
	if f.noChannel {
		cm.Channel = chShell
	}
	switch cm.Channel {
	case chShell, chControl, chStdin:
	default:
		return clientFrame{}, fmt.Errorf("%w: channel %.40q is not shell, control or stdin", errBadMessage, cm.Channel)
	}
	var h header
	if err := json.Unmarshal(cm.Header, &h); err != nil || h.MsgID == "" || h.MsgType == "" || len(h.MsgID) > maxMsgIDLen {
		return clientFrame{}, fmt.Errorf("%w: the header needs msg_id and msg_type", errBadMessage)
	}
	if len(cm.Header) > maxHeader {
		f.refused = fmt.Sprintf("the message's header is %d bytes; at most %d are accepted (the kernel echoes it in its replies)",
			len(cm.Header), maxHeader)
	}
	for _, part := range []json.RawMessage{cm.ParentHeader, cm.Metadata, cm.Content} {
		if len(part) > 0 && !json.Valid(part) {
			return clientFrame{}, fmt.Errorf("%w: a part is not JSON", errBadMessage)
		}
	}
	f.msg = sandbox.KernelMessage{Channel: cm.Channel, Header: cm.Header, ParentHeader: orEmpty(cm.ParentHeader),
		Metadata: orEmpty(cm.Metadata), Content: orEmpty(cm.Content), Buffers: buffers}
	f.msgID = h.MsgID
	return f, nil
}

// SubprotocolV1 is jupyter_server 2.x's kernel WebSocket protocol: every
// message a binary frame of a little-endian uint64 count n, n uint64
// offsets (channel, header, parent_header, metadata, content, buffers...,
// end), then those parts.
const SubprotocolV1 = "v1.kernel.websocket.jupyter.org"

// decodeV1 reads a v1 frame.
func decodeV1(data []byte) (clientMessage, [][]byte, error) {
	bad := func(format string, args ...any) (clientMessage, [][]byte, error) {
		return clientMessage{}, nil, fmt.Errorf("%w: v1 frame: %s", errBadMessage, fmt.Sprintf(format, args...))
	}
	if len(data) < 8 {
		return bad("%d bytes", len(data))
	}
	n := binary.LittleEndian.Uint64(data)
	if n < 6 || n > 6+maxBuffers || uint64(len(data)) < 8*(n+1) {
		return bad("%d offsets", n)
	}
	offsets := make([]int, n)
	for i := range offsets {
		o := binary.LittleEndian.Uint64(data[8*(i+1):])
		if o > uint64(len(data)) || (i == 0 && o < 8*(n+1)) || (i > 0 && int(o) < offsets[i-1]) {
			return bad("offset %d is out of order or range", i)
		}
		offsets[i] = int(o)
	}
	part := func(i int) []byte { return data[offsets[i]:offsets[i+1]] }
	cm := clientMessage{Channel: string(part(0)), Header: part(1), ParentHeader: part(2), Metadata: part(3), Content: part(4)}
	var buffers [][]byte
	for i := 5; i+1 < len(offsets); i++ {
		buffers = append(buffers, part(i))
	}
	return cm, buffers, nil
}

// encodeV1 is m in the v1 protocol's binary frame.
func encodeV1(m sandbox.KernelMessage) []byte {
	parts := append([][]byte{[]byte(m.Channel), m.Header, orEmpty(m.ParentHeader), orEmpty(m.Metadata), orEmpty(m.Content)}, m.Buffers...)
	n := len(parts) + 1
	size := 8 * (n + 1)
	for _, p := range parts {
		size += len(p)
	}
	out := make([]byte, 0, size)
	out = binary.LittleEndian.AppendUint64(out, uint64(n))
	at := 8 * (n + 1)
	for _, p := range parts {
		out = binary.LittleEndian.AppendUint64(out, uint64(at))
		at += len(p)
	}
	out = binary.LittleEndian.AppendUint64(out, uint64(at))
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func orEmpty(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage("{}")
	}
	return raw
}

// splitBinary cuts a binary frame into its JSON part and buffers.
func splitBinary(data []byte) ([]byte, [][]byte, error) {
	if len(data) < 4 {
		return nil, nil, fmt.Errorf("%w: binary frame of %d bytes", errBadMessage, len(data))
	}
	n := binary.BigEndian.Uint32(data)
	if n < 1 || n > maxBuffers+1 || len(data) < 4*(int(n)+1) {
		return nil, nil, fmt.Errorf("%w: binary frame with %d parts", errBadMessage, n)
	}
	offsets := make([]int, n+1)
	for i := range int(n) {
		offsets[i] = int(binary.BigEndian.Uint32(data[4*(i+1):]))
	}
	offsets[n] = len(data)
	if offsets[0] < 4*(int(n)+1) {
		return nil, nil, fmt.Errorf("%w: binary frame's first part overlaps its offsets", errBadMessage)
	}
	for i := range int(n) {
		if offsets[i] > offsets[i+1] {
			return nil, nil, fmt.Errorf("%w: binary frame's offsets are not increasing", errBadMessage)
		}
	}
	var buffers [][]byte
	for i := 1; i < int(n); i++ {
		buffers = append(buffers, data[offsets[i]:offsets[i+1]])
	}
	return data[offsets[0]:offsets[1]], buffers, nil
}

// kernelFrame is a kernel's message encoded for the WebSocket, with what
// the gateway needs to route it.
type kernelFrame struct {
	typ      websocket.MessageType
	data     []byte
	channel  string
	msgType  string
	parentID string
	// msg is the checked message, which a v1 connection encodes itself.
	msg sandbox.KernelMessage
}

// encodeKernel encodes a message from the kernel. The kernel's code can
// write anything into its sockets, so every JSON part is checked: a frame
// the client could not parse is never sent.
func encodeKernel(m sandbox.KernelMessage) (kernelFrame, error) {
	var h header
	if err := json.Unmarshal(m.Header, &h); err != nil {
		return kernelFrame{}, fmt.Errorf("%w: header: %v", errBadMessage, err)
	}
	f := kernelFrame{typ: websocket.MessageText, channel: m.Channel, msgType: h.MsgType, msg: m}
	var parent header
	if ph := orEmpty(m.ParentHeader); json.Unmarshal(ph, &parent) == nil {
		f.parentID = parent.MsgID
	} else {
		return kernelFrame{}, fmt.Errorf("%w: parent_header is not an object", errBadMessage)
	}
	parts := [...]json.RawMessage{orEmpty(m.Metadata), orEmpty(m.Content)}
	for _, p := range parts {
		if !json.Valid(p) {
			return kernelFrame{}, fmt.Errorf("%w: %s: metadata or content is not JSON", errBadMessage, h.MsgType)
		}
	}
	var b bytes.Buffer
	b.Grow(len(m.Header) + len(m.ParentHeader) + len(parts[0]) + len(parts[1]) + 128)
	b.WriteString(`{"channel":`)
	writeJSONString(&b, m.Channel)
	b.WriteString(`,"header":`)
	b.Write(m.Header)
	b.WriteString(`,"msg_id":`)
	writeJSONString(&b, h.MsgID)
	b.WriteString(`,"msg_type":`)
	writeJSONString(&b, h.MsgType)
	b.WriteString(`,"parent_header":`)
	b.Write(orEmpty(m.ParentHeader))
	b.WriteString(`,"metadata":`)
	b.Write(parts[0])
	b.WriteString(`,"content":`)
	b.Write(parts[1])
	if len(m.Buffers) == 0 {
		b.WriteString(`,"buffers":[]}`)
		f.data = b.Bytes()
		return f, nil
	}
	b.WriteString(`}`)
	f.typ, f.data = websocket.MessageBinary, joinBinary(b.Bytes(), m.Buffers)
	return f, nil
}

func writeJSONString(b *bytes.Buffer, s string) {
	q, _ := json.Marshal(s)
	b.Write(q)
}

// joinBinary is jupyter_server's serialize_binary_message.
func joinBinary(jsonPart []byte, buffers [][]byte) []byte {
	n := 1 + len(buffers)
	size := 4 * (n + 1)
	offsets := make([]int, n)
	offsets[0] = size
	size += len(jsonPart)
	for i, buf := range buffers {
		offsets[i+1] = size
		size += len(buf)
	}
	out := make([]byte, 0, size)
	out = binary.BigEndian.AppendUint32(out, uint32(n))
	for _, o := range offsets {
		out = binary.BigEndian.AppendUint32(out, uint32(o))
	}
	out = append(out, jsonPart...)
	for _, buf := range buffers {
		out = append(out, buf...)
	}
	return out
}
