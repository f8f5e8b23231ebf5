package agent

import "github.com/cubicle-sandbox/cubicle/internal/agent/protocol"

// outRing keeps the newest bytes of a background process's output, stdout
// and stderr in one sequence of offsets: at most limit bytes (a circular
// buffer that grows to limit as output comes) and at most maxSegs switches
// between the two streams. Older bytes are dropped; start says how many.
// It is not safe for concurrent use (its bgProc's lock guards it).
type outRing struct {
	buf        []byte // holds [start, end): offset o at o % len(buf)
	start, end int64
	segs       []ringSeg // stream of [segs[i].off, segs[i+1].off); segs[0].off <= start
	limit      int
	maxSegs    int
}

type ringSeg struct {
	off  int64
	kind protocol.Kind // KindStdout or KindStderr
}

// ringPiece is bytes of one stream, read from the ring.
type ringPiece struct {
	kind protocol.Kind
	data []byte
}

func newOutRing(limit, maxSegs int) *outRing { return &outRing{limit: limit, maxSegs: maxSegs} }

// write appends b, of stream kind, dropping the oldest bytes past the bounds.
func (r *outRing) write(kind protocol.Kind, b []byte) {
	for len(b) > 0 {
		n := min(len(b), r.limit)
		r.writeSome(kind, b[:n])
		b = b[n:]
	}
}

func (r *outRing) writeSome(kind protocol.Kind, b []byte) {
	if len(r.segs) == 0 || r.segs[len(r.segs)-1].kind != kind {
		r.segs = append(r.segs, ringSeg{off: r.end, kind: kind})
	}
	if need := int(r.end-r.start) + len(b); need > len(r.buf) && len(r.buf) < r.limit {
		r.grow(min(r.limit, max(2*len(r.buf), need, 4096)))
	}
	r.put(r.end, b)
	r.end += int64(len(b))
	if r.end-r.start > int64(len(r.buf)) {
		r.start = r.end - int64(len(r.buf))
	}
	for len(r.segs) > r.maxSegs {
		r.start = max(r.start, r.segs[1].off)
		r.segs = r.segs[1:]
	}
	drop := 0
	for drop+1 < len(r.segs) && r.segs[drop+1].off <= r.start {
		drop++
	}
	if drop > 0 {
		r.segs = append(r.segs[:0], r.segs[drop:]...)
	}
}

// grow re-lays the held bytes into a buffer of n bytes.
func (r *outRing) grow(n int) {
	held := r.get(r.start, r.end)
	r.buf = make([]byte, n)
	r.put(r.start, held)
}

// put writes b at offset off (len(b) <= len(r.buf)).
func (r *outRing) put(off int64, b []byte) {
	for len(b) > 0 {
		i := int(off % int64(len(r.buf)))
		k := copy(r.buf[i:], b)
		b, off = b[k:], off+int64(k)
	}
}

// get copies the bytes [from, to), which the ring holds.
func (r *outRing) get(from, to int64) []byte {
	out := make([]byte, 0, to-from)
	for from < to {
		i := int(from % int64(len(r.buf)))
		k := min(int(to-from), len(r.buf)-i)
		out = append(out, r.buf[i:i+k]...)
		from += int64(k)
	}
	return out
}

// read copies at most limit bytes from offset off, split by stream. from
// is where they start: off, or start when the bytes before it are gone
// (dropped = from - off). An offset past the end reads nothing.
func (r *outRing) read(off, limit int64) (from int64, pieces []ringPiece) {
	from = min(max(off, r.start), r.end)
	to := min(r.end, from+limit)
	pos := from
	for i, s := range r.segs {
		segEnd := r.end
		if i+1 < len(r.segs) {
			segEnd = r.segs[i+1].off
		}
		a, b := max(pos, s.off), min(to, segEnd)
		if a < b {
			pieces = append(pieces, ringPiece{kind: s.kind, data: r.get(a, b)})
			pos = b
		}
	}
	return from, pieces
}
