package jupyter

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// TestBinaryFrames: jupyter_server's binary format, as its
// serialize_binary_message writes it, both ways.
func TestBinaryFrames(t *testing.T) {
	js := []byte(`{"channel":"shell","header":{"msg_id":"m1","msg_type":"comm_msg"},"parent_header":{},"metadata":{},"content":{}}`)
	frame := joinBinary(js, [][]byte{[]byte("ab"), {}, []byte("c")})
	// 4 parts: count 4, offsets 20, 20+len(js), +2, +0.
	want := []uint32{4, 20, uint32(20 + len(js)), uint32(22 + len(js)), uint32(22 + len(js))}
	for i, w := range want {
		if got := binary.BigEndian.Uint32(frame[4*i:]); got != w {
			t.Fatalf("header word %d = %d, want %d", i, got, w)
		}
	}
	cf, err := decodeClient(websocket.MessageBinary, frame, false)
	m, id := cf.msg, cf.msgID
	if err != nil || id != "m1" || m.Channel != "shell" || len(m.Buffers) != 3 || string(m.Buffers[0]) != "ab" ||
		len(m.Buffers[1]) != 0 || string(m.Buffers[2]) != "c" {
		t.Fatalf("decode: %+v %q %v", m, id, err)
	}
	for name, bad := range map[string][]byte{
		"short":       {0, 0},
		"no parts":    {0, 0, 0, 0},
		"huge count":  {0xff, 0, 0, 0, 0, 0, 0, 8},
		"past end":    append([]byte{0, 0, 0, 1, 0, 0, 0, 99}, js...),
		"overlapping": append([]byte{0, 0, 0, 1, 0, 0, 0, 2}, js...),
		"decreasing":  append([]byte{0, 0, 0, 2, 0, 0, 0, 40, 0, 0, 0, 12}, make([]byte, 40)...),
	} {
		if _, err := decodeClient(websocket.MessageBinary, bad, false); !errors.Is(err, errBadMessage) {
			t.Errorf("%s: %v, want errBadMessage", name, err)
		}
	}
}

// TestDecodeClient: a client's message needs a known channel and a header
// with msg_id and msg_type; missing parts become {}.
func TestDecodeClient(t *testing.T) {
	cf, err := decodeClient(websocket.MessageText, []byte(`{"channel":"stdin","header":{"msg_id":"x","msg_type":"input_reply"},"content":{"value":"v"}}`), false)
	m, id := cf.msg, cf.msgID
	if err != nil || id != "x" || string(m.ParentHeader) != "{}" || string(m.Metadata) != "{}" || string(m.Content) != `{"value":"v"}` {
		t.Fatalf("%+v %v", m, err)
	}
	for _, bad := range []string{`nope`, `{"channel":"iopub","header":{"msg_id":"x","msg_type":"t"}}`,
		`{"channel":"shell","header":{"msg_type":"t"}}`, `{"channel":"shell","header":"x"}`, `{"channel":"hb","header":{"msg_id":"x","msg_type":"t"}}`} {
		if _, err := decodeClient(websocket.MessageText, []byte(bad), false); !errors.Is(err, errBadMessage) {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

// TestDecodeClientOversizeHeader: a header over maxHeader is marked
// refused (the kernel never gets it); one at the bound is not.
func TestDecodeClientOversizeHeader(t *testing.T) {
	frame := func(size int) []byte {
		h := `{"msg_id":"x","msg_type":"execute_request","pad":""}`
		h = strings.Replace(h, `""`, `"`+strings.Repeat("p", size-len(h))+`"`, 1)
		return []byte(`{"channel":"shell","header":` + h + `,"content":{}}`)
	}
	cf, err := decodeClient(websocket.MessageText, frame(maxHeader), false)
	if err != nil || cf.refused != "" || len(cf.msg.Header) != maxHeader {
		t.Fatalf("at the bound: %q %d, %v", cf.refused, len(cf.msg.Header), err)
	}
	cf, err = decodeClient(websocket.MessageText, frame(maxHeader+1), false)
	if err != nil || !strings.Contains(cf.refused, "at most 8192") || cf.msgID != "x" {
		t.Fatalf("over the bound: %q, %v", cf.refused, err)
	}
}

// TestDecodeClientWithoutChannel: a message without a channel goes to
// shell, as jupyter_server treats it (GatewayKernelClient sends such).
func TestDecodeClientWithoutChannel(t *testing.T) {
	cf, err := decodeClient(websocket.MessageText, []byte(`{"header":{"msg_id":"x","msg_type":"kernel_info_request","date":1733100000.5},"content":{}}`), false)
	if err != nil || cf.msg.Channel != chShell || !cf.noChannel || cf.msgID != "x" {
		t.Fatalf("%+v %v", cf, err)
	}
}

// TestV1Frames: the v1.kernel.websocket.jupyter.org binary format both
// ways, as jupyter_server's serialize_msg_to_ws_v1 writes it, and bad
// frames refused.
func TestV1Frames(t *testing.T) {
	m := sandbox.KernelMessage{Channel: "shell", Header: json.RawMessage(`{"msg_id":"m1","msg_type":"comm_msg"}`),
		ParentHeader: json.RawMessage(`{}`), Metadata: json.RawMessage(`{}`), Content: json.RawMessage(`{"a":1}`),
		Buffers: [][]byte{[]byte("ab"), {}}}
	frame := encodeV1(m)
	// 8 offsets: channel, header, parent, metadata, content, 2 buffers, end.
	if n := binary.LittleEndian.Uint64(frame); n != 8 || binary.LittleEndian.Uint64(frame[8:]) != 72 ||
		binary.LittleEndian.Uint64(frame[64:]) != uint64(len(frame)) || string(frame[72:77]) != "shell" {
		t.Fatalf("frame % x", frame[:80])
	}
	cf, err := decodeClient(websocket.MessageBinary, frame, true)
	if err != nil || cf.msgID != "m1" || cf.msg.Channel != "shell" || string(cf.msg.Content) != `{"a":1}` ||
		len(cf.msg.Buffers) != 2 || string(cf.msg.Buffers[0]) != "ab" {
		t.Fatalf("decode: %+v %v", cf, err)
	}
	le := func(words ...uint64) []byte {
		var b []byte
		for _, w := range words {
			b = binary.LittleEndian.AppendUint64(b, w)
		}
		return b
	}
	for name, bad := range map[string][]byte{
		"short":      {1, 2},
		"few":        le(2, 24, 24),
		"huge count": le(1 << 40),
		"past end":   le(6, 56, 56, 56, 56, 56, 999),
		"decreasing": append(le(6, 56, 60, 58, 60, 60, 60), make([]byte, 4)...),
		"not json":   append(le(6, 56, 61, 64, 66, 68, 70), []byte("shellxyz{}{}{}")...),
	} {
		if _, err := decodeClient(websocket.MessageBinary, bad, true); !errors.Is(err, errBadMessage) {
			t.Errorf("%s: %v, want errBadMessage", name, err)
		}
	}
}

// TestEncodeKernel: a kernel's message becomes jupyter_server's JSON (with
// msg_id and msg_type at the top); a hostile one that is not JSON is
// refused rather than sent broken.
func TestEncodeKernel(t *testing.T) {
	m := sandbox.KernelMessage{Channel: "iopub", Header: json.RawMessage(`{"msg_id":"k1","msg_type":"stream"}`),
		ParentHeader: json.RawMessage(`{"msg_id":"p1"}`), Content: json.RawMessage(`{"name":"stdout","text":"</script>"}`)}
	f, err := encodeKernel(m)
	if err != nil || f.typ != websocket.MessageText || f.parentID != "p1" || f.msgType != "stream" {
		t.Fatalf("%+v %v", f, err)
	}
	var got map[string]any
	if err := json.Unmarshal(f.data, &got); err != nil {
		t.Fatal(err)
	}
	if got["msg_id"] != "k1" || got["msg_type"] != "stream" || got["channel"] != "iopub" || got["metadata"] == nil ||
		len(got["buffers"].([]any)) != 0 || !bytes.Contains(f.data, []byte("</script>")) {
		t.Fatalf("encoded %s", f.data)
	}
	for _, bad := range []sandbox.KernelMessage{
		{Channel: "iopub", Header: json.RawMessage(`{"msg_id":`), Content: json.RawMessage(`{}`)},
		{Channel: "iopub", Header: json.RawMessage(`{"msg_id":"a","msg_type":"b"}`), Content: json.RawMessage(`{"x":`)},
		{Channel: "iopub", Header: json.RawMessage(`{"msg_id":"a","msg_type":"b"}`), ParentHeader: json.RawMessage(`[1]`)},
	} {
		if _, err := encodeKernel(bad); !errors.Is(err, errBadMessage) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}
