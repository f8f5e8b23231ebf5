package kgw

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
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
	m, id, err := decodeClient(websocket.MessageBinary, frame)
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
		if _, _, err := decodeClient(websocket.MessageBinary, bad); !errors.Is(err, errBadMessage) {
			t.Errorf("%s: %v, want errBadMessage", name, err)
		}
	}
}

// TestDecodeClient: a client's message needs a known channel and a header
// with msg_id and msg_type; missing parts become {}.
func TestDecodeClient(t *testing.T) {
	m, id, err := decodeClient(websocket.MessageText, []byte(`{"channel":"stdin","header":{"msg_id":"x","msg_type":"input_reply"},"content":{"value":"v"}}`))
	if err != nil || id != "x" || string(m.ParentHeader) != "{}" || string(m.Metadata) != "{}" || string(m.Content) != `{"value":"v"}` {
		t.Fatalf("%+v %v", m, err)
	}
	for _, bad := range []string{`nope`, `{"channel":"iopub","header":{"msg_id":"x","msg_type":"t"}}`,
		`{"channel":"shell","header":{"msg_type":"t"}}`, `{"channel":"shell","header":"x"}`, `{"channel":"hb","header":{"msg_id":"x","msg_type":"t"}}`} {
		if _, _, err := decodeClient(websocket.MessageText, []byte(bad)); !errors.Is(err, errBadMessage) {
			t.Errorf("%s: %v", bad, err)
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
