package httpapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestStreamOutEvents: a frame of output (up to protocol.OutputChunk,
// 1 MiB) goes out as SSE events of at most maxEventData bytes each, text
// cut between UTF-8 sequences and base64 at multiples of 3 bytes so that
// each event's value decodes on its own, and together they are the
// output, byte for byte. An event of NULs stays about 1.5 MiB.
func TestStreamOutEvents(t *testing.T) {
	text := []byte(strings.Repeat("é€𝄞a", 90_000)) // 900,000 bytes, no cut of 256 KiB falls between sequences
	nuls := make([]byte, 1<<20)
	for _, c := range []struct {
		name   string
		data   []byte
		base64 bool
	}{{"text", text, false}, {"nuls", nuls, false}, {"base64", text, true}} {
		rec := httptest.NewRecorder()
		out := &streamOut{sse: newSSE(rec), base64: c.base64}
		out.write("stdout", c.data)
		out.flush()
		out.sse.close()
		var got []byte
		events := strings.Split(strings.TrimSpace(rec.Body.String()), "\n\n")
		for _, ev := range events {
			line := ev[strings.Index(ev, "data: ")+len("data: "):]
			if len(line) > 6*maxEventData+64 { // "\u0000" for each NUL, and the wrapper
				t.Errorf("%s: an event of %d bytes", c.name, len(line))
			}
			var v struct{ Data string }
			if err := json.Unmarshal([]byte(line), &v); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			piece := []byte(v.Data)
			if c.base64 {
				var err error
				if piece, err = base64.StdEncoding.DecodeString(v.Data); err != nil {
					t.Fatalf("%s: an event's base64 does not decode on its own: %v", c.name, err)
				}
			} else if !utf8.Valid(piece) {
				t.Errorf("%s: an event cuts a UTF-8 sequence", c.name)
			}
			if len(piece) > maxEventData {
				t.Errorf("%s: an event of %d bytes of output, want at most %d", c.name, len(piece), maxEventData)
			}
			got = append(got, piece...)
		}
		if !bytes.Equal(got, c.data) || len(events) < (len(c.data)+maxEventData-1)/maxEventData {
			t.Errorf("%s: %d events carry %d bytes, want %d", c.name, len(events), len(got), len(c.data))
		}
	}
}
