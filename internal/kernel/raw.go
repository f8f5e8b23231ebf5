package kernel

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
)

// Raw mode (Options.OnMessage) relays a kernel to a Jupyter client: the
// client's messages go to the kernel as given (only signed here), and every
// message the kernel sends comes back unchanged, as its JSON parts, buffers
// and channel. The Client's own requests (Connect's kernel_info, KernelInfo,
// Shutdown) still work: replies whose parent is one of the Client's own
// message ids are handled as usual and not delivered.
//
// Trust: a message whose signature is missing or wrong, or that is not even
// framed as a Jupyter message, is dropped and counted (Stats) as in normal
// mode: nothing authenticated it. A correctly signed message whose parts
// are not JSON objects (or whose header lacks msg_id/msg_type strings) can
// only come from code in the kernel that read the key and forged it, so it
// is a protocol violation: the Client ends with a *ProtocolError. Size and
// framing violations end it too, as in normal mode.

// RawMessage is one Jupyter message as it travels between a client and a
// kernel: the four JSON parts (each a JSON object), binary buffers, and the
// channel ("shell", "iopub", "stdin" or "control").
type RawMessage struct {
	Channel      string
	Header       json.RawMessage
	ParentHeader json.RawMessage
	Metadata     json.RawMessage
	Content      json.RawMessage
	Buffers      [][]byte
}

// Size is the message's size on the wire, without identities and signature.
func (m *RawMessage) Size() int64 {
	n := int64(len(m.Header) + len(m.ParentHeader) + len(m.Metadata) + len(m.Content))
	for _, b := range m.Buffers {
		n += int64(len(b))
	}
	return n
}

// ErrInvalidMessage reports a client message SendRaw refuses.
var ErrInvalidMessage = errors.New("invalid Jupyter message")

// errSigned marks a message that passed signature verification but is not
// well-formed: only code that knows the key can have sent it.
var errSigned = errors.New("signed")

// ValidateRaw checks the shape every relayed message must have: known
// channel, header with msg_id and msg_type strings, and JSON objects for
// parent_header, metadata and content. It does not bound sizes.
func ValidateRaw(m *RawMessage) error {
	switch m.Channel {
	case "shell", "iopub", "stdin", "control":
	default:
		return fmt.Errorf("%w: unknown channel %q", ErrInvalidMessage, clip(m.Channel, 40))
	}
	for _, p := range []struct {
		name string
		v    json.RawMessage
	}{{"header", m.Header}, {"parent_header", m.ParentHeader}, {"metadata", m.Metadata}, {"content", m.Content}} {
		if !isObject(p.v) {
			return fmt.Errorf("%w: %s is not a JSON object", ErrInvalidMessage, p.name)
		}
	}
	var h struct {
		MsgID   *string `json:"msg_id"`
		MsgType *string `json:"msg_type"`
	}
	if err := json.Unmarshal(m.Header, &h); err != nil || h.MsgID == nil || h.MsgType == nil || *h.MsgID == "" || *h.MsgType == "" {
		return fmt.Errorf("%w: header needs msg_id and msg_type strings", ErrInvalidMessage)
	}
	return nil
}

// isObject reports whether b is one valid JSON value that is an object.
func isObject(b []byte) bool {
	t := bytes.TrimLeft(b, " \t\r\n")
	return len(t) > 0 && t[0] == '{' && json.Valid(t)
}

// rawOf turns a parsed message from socket z into what raw mode delivers,
// or a protocol error when a signed message is not a valid one.
func rawOf(z *zconn, m *Message) (RawMessage, error) {
	r := RawMessage{Channel: z.name, Header: m.RawHeader, ParentHeader: m.RawParent, Metadata: m.Metadata, Content: m.Content, Buffers: m.Buffers}
	if err := ValidateRaw(&r); err != nil {
		return RawMessage{}, &ProtocolError{Socket: z.name, Msg: "kernel sent a signed message that is not a valid Jupyter message: " + err.Error()}
	}
	return r, nil
}

// SendRaw sends a client's message to the kernel on m.Channel (shell,
// control or stdin; stdin shares shell's identity, so the kernel's
// input_request for a shell request reaches it). The JSON parts go as
// given, signed with the kernel's key. A message SendRaw refuses returns
// ErrInvalidMessage and leaves the Client working; a write that fails ends
// the Client.
func (c *Client) SendRaw(m RawMessage) error {
	if err := c.Err(); err != nil {
		return err
	}
	var z *zconn
	switch m.Channel {
	case "shell":
		z = c.shell
	case "control":
		z = c.control
	case "stdin":
		z = c.stdin
	default:
		return fmt.Errorf("%w: a client cannot send on channel %q", ErrInvalidMessage, clip(m.Channel, 40))
	}
	if err := ValidateRaw(&m); err != nil {
		return err
	}
	if n := m.Size(); n > c.opts.MaxMessageBytes {
		return fmt.Errorf("%w: message of %d bytes; the limit is %d", ErrInvalidMessage, n, c.opts.MaxMessageBytes)
	}
	var sig []byte
	if len(c.sign.key) > 0 {
		mac := hmac.New(sha256.New, c.sign.key)
		for _, p := range [][]byte{m.Header, m.ParentHeader, m.Metadata, m.Content} {
			mac.Write(p)
		}
		sig = make([]byte, 2*sha256.Size)
		hex.Encode(sig, mac.Sum(nil))
	}
	frames := make([][]byte, 0, 6+len(m.Buffers))
	frames = append(frames, []byte(delimiter), sig, m.Header, m.ParentHeader, m.Metadata, m.Content)
	frames = append(frames, m.Buffers...)
	if err := z.writeMessage(frames); err != nil {
		c.fail(err)
		return c.err
	}
	return nil
}
