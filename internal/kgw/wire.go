package kgw

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

// decodeClient parses one frame from a client into the message for the
// kernel and its msg_id.
func decodeClient(typ websocket.MessageType, data []byte) (sandbox.KernelMessage, string, error) {
	jsonPart, buffers := data, [][]byte(nil)
	if typ == websocket.MessageBinary {
		var err error
		if jsonPart, buffers, err = splitBinary(data); err != nil {
			return sandbox.KernelMessage{}, "", err
		}
	}
	var cm clientMessage
	if err := json.Unmarshal(jsonPart, &cm); err != nil {
		return sandbox.KernelMessage{}, "", fmt.Errorf("%w: %v", errBadMessage, err)
	}
	switch cm.Channel {
	case chShell, chControl, chStdin:
	default:
		return sandbox.KernelMessage{}, "", fmt.Errorf("%w: channel %.40q is not shell, control or stdin", errBadMessage, cm.Channel)
	}
	var h header
	if err := json.Unmarshal(cm.Header, &h); err != nil || h.MsgID == "" || h.MsgType == "" || len(h.MsgID) > maxMsgIDLen {
		return sandbox.KernelMessage{}, "", fmt.Errorf("%w: the header needs msg_id and msg_type", errBadMessage)
	}
	return sandbox.KernelMessage{Channel: cm.Channel, Header: cm.Header, ParentHeader: orEmpty(cm.ParentHeader),
		Metadata: orEmpty(cm.Metadata), Content: orEmpty(cm.Content), Buffers: buffers}, h.MsgID, nil
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
}

// encodeKernel encodes a message from the kernel. The kernel's code can
// write anything into its sockets, so every JSON part is checked: a frame
// the client could not parse is never sent.
func encodeKernel(m sandbox.KernelMessage) (kernelFrame, error) {
	var h header
	if err := json.Unmarshal(m.Header, &h); err != nil {
		return kernelFrame{}, fmt.Errorf("%w: header: %v", errBadMessage, err)
	}
	f := kernelFrame{typ: websocket.MessageText, channel: m.Channel, msgType: h.MsgType}
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
