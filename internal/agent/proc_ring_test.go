package agent

import (
	"bytes"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
)

func ringText(pieces []ringPiece) string {
	var b bytes.Buffer
	for _, p := range pieces {
		if p.kind == protocol.KindStderr {
			b.WriteString("E:")
		} else {
			b.WriteString("O:")
		}
		b.Write(p.data)
		b.WriteString("|")
	}
	return b.String()
}

// The ring keeps the newest limit bytes in order, split by stream, and
// reads from an offset say where they start when older bytes are gone.
func TestOutRing(t *testing.T) {
	r := newOutRing(10, 100)
	r.write(protocol.KindStdout, []byte("abc"))
	r.write(protocol.KindStderr, []byte("de"))
	r.write(protocol.KindStdout, []byte("f"))
	if from, p := r.read(0, 100); from != 0 || ringText(p) != "O:abc|E:de|O:f|" {
		t.Fatalf("read: %d %q", from, ringText(p))
	}
	if from, p := r.read(2, 3); from != 2 || ringText(p) != "O:c|E:de|" {
		t.Fatalf("read 2..5: %d %q", from, ringText(p))
	}
	r.write(protocol.KindStdout, []byte("ghijklmn")) // 14 bytes written, 10 held
	if r.start != 4 || r.end != 14 {
		t.Fatalf("start %d end %d, want 4 14", r.start, r.end)
	}
	if from, p := r.read(0, 100); from != 4 || ringText(p) != "E:e|O:fghijklmn|" {
		t.Fatalf("read after wrap: %d %q", from, ringText(p))
	}
	if from, p := r.read(14, 100); from != 14 || len(p) != 0 {
		t.Fatalf("read at end: %d %q", from, ringText(p))
	}
	r.write(protocol.KindStderr, bytes.Repeat([]byte("x"), 25)) // larger than the ring
	if from, p := r.read(0, 100); from != 29 || ringText(p) != "E:xxxxxxxxxx|" || len(r.segs) != 1 {
		t.Fatalf("read after a write over the limit: %d %q, %d segments", from, ringText(p), len(r.segs))
	}
}

// Alternating streams are bounded too: past maxSegs switches the oldest
// bytes go, though the bytes would fit.
func TestOutRingSwitches(t *testing.T) {
	r := newOutRing(1<<20, 4)
	for i := 0; i < 10; i++ {
		k := protocol.KindStdout
		if i%2 == 1 {
			k = protocol.KindStderr
		}
		r.write(k, []byte{'0' + byte(i)})
	}
	if from, p := r.read(0, 100); from != 6 || ringText(p) != "O:6|E:7|O:8|E:9|" || len(r.segs) != 4 {
		t.Fatalf("read: %d %q, %d segments", from, ringText(p), len(r.segs))
	}
}
