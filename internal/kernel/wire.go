package kernel

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"time"
)

// Jupyter messaging protocol 5.x over ZMTP:
// [identities..., "<IDS|MSG>", hmac, header, parent_header, metadata, content, buffers...]

const (
	delimiter       = "<IDS|MSG>"
	protocolVersion = "5.3"

	// maxHeaderJSON bounds header and parent_header; maxMetadataJSON bounds
	// metadata. Content is bounded only by the message limit.
	maxHeaderJSON   = 64 << 10
	maxMetadataJSON = 1 << 20
)

// Header is a Jupyter message header (also used for parent_header).
type Header struct {
	MsgID    string `json:"msg_id"`
	MsgType  string `json:"msg_type"`
	Session  string `json:"session"`
	Username string `json:"username"`
	Date     string `json:"date"`
	Version  string `json:"version"`
}

// parseHeader reads a received header liberally, as jupyter_client does:
// msg_id and msg_type must be strings, the other fields may be any JSON
// (a kernel echoes its client's header as parent_header, and
// jupyter_server's GatewayKernelClient sends date as a number); a field
// that is not a string is kept as its JSON text.
func parseHeader(raw []byte) (Header, error) {
	var w struct {
		MsgID    string          `json:"msg_id"`
		MsgType  string          `json:"msg_type"`
		Session  json.RawMessage `json:"session"`
		Username json.RawMessage `json:"username"`
		Date     json.RawMessage `json:"date"`
		Version  json.RawMessage `json:"version"`
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		return Header{}, err
	}
	return Header{MsgID: w.MsgID, MsgType: w.MsgType, Session: anyText(w.Session), Username: anyText(w.Username),
		Date: anyText(w.Date), Version: anyText(w.Version)}, nil
}

// anyText is a JSON string's value, or any other JSON value's text.
func anyText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// Message is a parsed, signature-checked Jupyter message.
type Message struct {
	Identities [][]byte
	Header     Header
	Parent     Header
	RawHeader  json.RawMessage // header and parent_header as received
	RawParent  json.RawMessage
	Metadata   json.RawMessage
	Content    json.RawMessage
	Buffers    [][]byte
}

var (
	errBadSignature = errors.New("bad signature")
	errMalformed    = errors.New("malformed message")
)

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errMalformed, fmt.Sprintf(format, args...))
}

// signedMalformed is malformed for a message whose signature was valid.
func signedMalformed(format string, args ...any) error {
	return fmt.Errorf("%w (%w): %s", errMalformed, errSigned, fmt.Sprintf(format, args...))
}

// verifier checks signatures; one per reader goroutine (hash state is not
// shared). A nil mac means the connection key is empty: messages are unsigned.
type verifier struct {
	mac hash.Hash
	sum []byte
}

func newVerifier(key []byte) *verifier {
	if len(key) == 0 {
		return &verifier{}
	}
	return &verifier{mac: hmac.New(sha256.New, key)}
}

func (v *verifier) sign(parts ...[]byte) []byte {
	v.mac.Reset()
	for _, p := range parts {
		v.mac.Write(p)
	}
	v.sum = v.mac.Sum(v.sum[:0])
	return v.sum
}

// parseMessage splits, authenticates and decodes the frames of one message.
// The returned error wraps errBadSignature or errMalformed; errMalformed
// also wraps errSigned when the signature was valid.
func parseMessage(frames [][]byte, v *verifier) (*Message, error) {
	d := -1
	for i, f := range frames {
		if string(f) == delimiter {
			d = i
			break
		}
	}
	if d < 0 {
		return nil, malformed("no %s delimiter", delimiter)
	}
	if len(frames)-d < 6 {
		return nil, malformed("%d frames after the delimiter, want at least 5", len(frames)-d-1)
	}
	sig, hdr, parent, meta, content := frames[d+1], frames[d+2], frames[d+3], frames[d+4], frames[d+5]
	if v.mac != nil {
		if len(sig) != 2*sha256.Size {
			return nil, fmt.Errorf("%w: signature of %d bytes", errBadSignature, len(sig))
		}
		var want [sha256.Size]byte
		if _, err := hex.Decode(want[:], sig); err != nil {
			return nil, fmt.Errorf("%w: signature is not hex", errBadSignature)
		}
		if !hmac.Equal(want[:], v.sign(hdr, parent, meta, content)) {
			return nil, errBadSignature
		}
	}
	if len(hdr) > maxHeaderJSON || len(parent) > maxHeaderJSON {
		return nil, signedMalformed("header of %d bytes, parent header of %d bytes; the limit is %d", len(hdr), len(parent), maxHeaderJSON)
	}
	if len(meta) > maxMetadataJSON {
		return nil, signedMalformed("metadata of %d bytes; the limit is %d", len(meta), maxMetadataJSON)
	}
	m := &Message{Identities: frames[:d], RawHeader: hdr, RawParent: parent, Buffers: frames[d+6:]}
	var err error
	if m.Header, err = parseHeader(hdr); err != nil {
		return nil, signedMalformed("header: %v", err)
	}
	if m.Header.MsgType == "" {
		return nil, signedMalformed("header without msg_type")
	}
	if m.Parent, err = parseHeader(parent); err != nil {
		return nil, signedMalformed("parent header: %v", err)
	}
	if !json.Valid(meta) {
		return nil, signedMalformed("metadata is not JSON")
	}
	m.Metadata = meta
	m.Content = content // decoded (and so validated) by whoever handles the message type
	return m, nil
}

// signer builds outgoing messages.
type signer struct {
	key      []byte
	session  string
	username string
}

func (s *signer) header(id, msgType string) Header {
	return Header{
		MsgID:    id,
		MsgType:  msgType,
		Session:  s.session,
		Username: s.username,
		Date:     time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"),
		Version:  protocolVersion,
	}
}

// encode returns the frames of a message; parent may be nil.
func (s *signer) encode(identities [][]byte, hdr Header, parent *Header, content any) ([][]byte, error) {
	h, err := json.Marshal(hdr)
	if err != nil {
		return nil, err
	}
	p := []byte("{}")
	if parent != nil {
		if p, err = json.Marshal(parent); err != nil {
			return nil, err
		}
	}
	c, err := json.Marshal(content)
	if err != nil {
		return nil, err
	}
	meta := []byte("{}")
	var sig []byte
	if len(s.key) > 0 {
		mac := hmac.New(sha256.New, s.key)
		for _, part := range [][]byte{h, p, meta, c} {
			mac.Write(part)
		}
		sig = make([]byte, 2*sha256.Size)
		hex.Encode(sig, mac.Sum(nil))
	}
	frames := make([][]byte, 0, len(identities)+6)
	frames = append(frames, identities...)
	return append(frames, []byte(delimiter), sig, h, p, meta, c), nil
}

// decodeContent unmarshals a message's content into v.
func decodeContent(m *Message, v any) error {
	if err := json.Unmarshal(m.Content, v); err != nil {
		return malformed("%s content: %v", clip(m.Header.MsgType, 40), err)
	}
	return nil
}
