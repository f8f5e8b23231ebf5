package client

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestOutputData: an output event's data decodes as encoding/json
// decodes it, whether the fast path takes it (the server's shape) or
// hands it on (other shapes, escapes it does not take, bad JSON).
func TestOutputData(t *testing.T) {
	cases := []string{`{"data":""}`, `{"data":"a\nb\t\"\\\/\b\f\r"}`, `{"data":"\u0000\u003c\u2028\ud83d\ude00"}`,
		`{"data":"\ud800x"}`, `{"data":"\ud800\u0041"}`, `{"data":"\udc00"}`, "{\"data\":\"\xff\"}", `{"data":"€𝄞"}`,
		`{ "data": "spaced" }`, `{"data":"a","x":"b"}`, `{"data":"bad \q"}`, `{"data":"raw` + "\n" + `"}`, `{"data":"\u12"}`,
		`{"data":null}`, `{"other":"x"}`, `{"data":"cut\`}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		j, _ := json.Marshal(map[string]string{"data": string(b)})
		cases = append(cases, string(j))
	}
	for _, c := range cases {
		var d struct {
			Data *string `json:"data"`
		}
		werr := json.Unmarshal([]byte(c), &d)
		got, err := outputData([]byte(c))
		switch {
		case werr != nil || d.Data == nil:
			if err == nil {
				t.Errorf("%q: got %q, want an error", c, got)
			}
		case err != nil || got != *d.Data:
			t.Errorf("%q: got %q, %v; want %q", c, got, err, *d.Data)
		}
	}
}

// TestAppendOutputData: base64 events decode to the exact bytes (NULs,
// invalid UTF-8) appended after what dst held, the server's shape directly
// and any other JSON of the same meaning through encoding/json; bad base64
// is an error; text decodes into dst as outputData does.
func TestAppendOutputData(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for range 500 {
		b := make([]byte, rng.IntN(3000))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		enc := base64.StdEncoding.EncodeToString(b)
		escaped := strings.ReplaceAll(enc, "/", `\/`) // valid JSON, not the server's shape
		for _, ev := range []string{`{"data":"` + enc + `"}`, `{"data":"` + escaped + `"}`, `{ "data": "` + enc + `" }`} {
			got, err := appendOutputData([]byte("prefix"), []byte(ev), true)
			if err != nil || !bytes.Equal(got, append([]byte("prefix"), b...)) {
				t.Fatalf("%.80q: %v, %d bytes", ev, err, len(got))
			}
		}
	}
	for _, bad := range []string{`{"data":"@@@@"}`, `{"data":"QUJD\u0000"}`, `{"data":"QUJ"}`} {
		if _, err := appendOutputData(nil, []byte(bad), true); err == nil {
			t.Errorf("%q decoded without an error", bad)
		}
	}
	got, err := appendOutputData([]byte("x"), []byte(`{"data":"a\n\u00e9"}`), false)
	if err != nil || string(got) != "xa\né" {
		t.Fatalf("text: %q, %v", got, err)
	}
}

// TestFrameReader: frames are read back with their types, keep-alives
// skipped; a frame over MaxBinaryFrame is refused before its payload is
// read, a stream cut inside a frame is ErrTruncated, one cut between
// frames io.EOF.
func TestFrameReader(t *testing.T) {
	frame := func(typ byte, n uint32, payload string) []byte {
		b := []byte{typ}
		b = binary.BigEndian.AppendUint32(b, n)
		return append(b, payload...)
	}
	var s []byte
	s = append(s, frame(FrameStdout, 3, "abc")...)
	s = append(s, frame(FrameKeepAlive, 0, "")...)
	s = append(s, frame(FrameStderr, 1, "\x00")...)
	r := NewFrameReader(bytes.NewReader(s))
	for _, want := range []struct {
		typ  byte
		data string
	}{{FrameStdout, "abc"}, {FrameStderr, "\x00"}} {
		typ, p, err := r.Next()
		if err != nil || typ != want.typ || string(p) != want.data {
			t.Fatalf("got %d %q %v, want %d %q", typ, p, err, want.typ, want.data)
		}
	}
	if _, _, err := r.Next(); err != io.EOF {
		t.Fatalf("at the end: %v, want io.EOF", err)
	}
	huge := frame(FrameStdout, MaxBinaryFrame+1, "")
	if _, _, err := NewFrameReader(bytes.NewReader(huge)).Next(); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("a frame over the bound: %v", err)
	}
	for _, cut := range [][]byte{frame(FrameStdout, 10, "abc"), {FrameStdout, 0, 0}} {
		if _, _, err := NewFrameReader(bytes.NewReader(cut)).Next(); !errors.Is(err, ErrTruncated) {
			t.Errorf("cut %q: %v, want ErrTruncated", cut, err)
		}
	}
}
