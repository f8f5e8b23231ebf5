package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"
	"time"
)

// frameHeader encodes a frame header announcing n payload bytes.
func frameHeader(n uint32, kind Kind, id uint32) []byte {
	var h [headerSize]byte
	binary.BigEndian.PutUint32(h[0:4], n)
	h[4] = byte(kind)
	binary.BigEndian.PutUint32(h[5:9], id)
	return h[:]
}

// frameEndlessReader serves a fixed prefix, then zeros forever, counting what
// was read past the prefix: a reader that refuses a frame by its header
// must not read (let alone buffer) the announced payload.
type frameEndlessReader struct {
	prefix []byte
	extra  int64
}

func (r *frameEndlessReader) Read(p []byte) (int, error) {
	if len(r.prefix) > 0 {
		n := copy(p, r.prefix)
		r.prefix = r.prefix[n:]
		return n, nil
	}
	clear(p)
	r.extra += int64(len(p))
	return len(p), nil
}

func TestFrameRoundTrip(t *testing.T) {
	cases := []Frame{
		{Kind: KindPing, ID: 1},
		{Kind: KindStdout, ID: 0xfffffffe, Payload: []byte("hello")},
		{Kind: KindData, ID: 7, Payload: bytes.Repeat([]byte{0xab}, ChunkSize)},
		{Kind: KindData, ID: 8, Payload: bytes.Repeat([]byte{1}, MaxPayload)},
	}
	var stream []byte
	for _, f := range cases {
		var err error
		stream, err = AppendFrame(stream, f)
		if err != nil {
			t.Fatalf("AppendFrame(kind %d, %d bytes): %v", f.Kind, len(f.Payload), err)
		}
	}
	r := bytes.NewReader(stream)
	for i, want := range cases {
		got, err := ReadFrame(r)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if got.Kind != want.Kind || got.ID != want.ID || !bytes.Equal(got.Payload, want.Payload) {
			t.Fatalf("frame %d: got kind %d id %d %d bytes, want kind %d id %d %d bytes",
				i, got.Kind, got.ID, len(got.Payload), want.Kind, want.ID, len(want.Payload))
		}
	}
	if _, err := ReadFrame(r); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last frame: err = %v, want io.EOF", err)
	}
}

func TestFrameAppendRefusesOversizedPayload(t *testing.T) {
	buf := []byte("keep")
	out, err := AppendFrame(buf, Frame{Kind: KindData, Payload: make([]byte, MaxPayload+1)})
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("err = %v, want ErrFrameTooLarge", err)
	}
	if string(out) != "keep" {
		t.Fatalf("a refused frame changed the buffer: %d bytes", len(out))
	}
}

func TestFrameTooLargeIsRefusedBeforeAllocation(t *testing.T) {
	for _, n := range []uint32{MaxPayload + 1, 1 << 31, 0xffffffff} {
		r := &frameEndlessReader{prefix: frameHeader(n, KindStdout, 3)}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		start := time.Now()
		_, err := ReadFrame(r)
		elapsed := time.Since(start)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrFrameTooLarge) {
			t.Fatalf("announced %d bytes: err = %v, want ErrFrameTooLarge", n, err)
		}
		if r.extra != 0 {
			t.Errorf("announced %d bytes: read %d payload bytes of a refused frame", n, r.extra)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<10 {
			t.Errorf("announced %d bytes: allocated %d bytes while refusing the frame", n, alloc)
		}
		if elapsed > time.Second {
			t.Errorf("announced %d bytes: refusing took %v", n, elapsed)
		}
	}
	// The largest legal payload is accepted.
	r := &frameEndlessReader{prefix: frameHeader(MaxPayload, KindStdout, 3)}
	f, err := ReadFrame(r)
	if err != nil || len(f.Payload) != MaxPayload {
		t.Fatalf("MaxPayload frame: %d bytes, err %v", len(f.Payload), err)
	}
}

func TestFrameTruncated(t *testing.T) {
	full, err := AppendFrame(nil, Frame{Kind: KindOK, ID: 9, Payload: []byte(`{"a":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFrame(bytes.NewReader(nil)); !errors.Is(err, io.EOF) {
		t.Errorf("empty stream: err = %v, want io.EOF", err)
	}
	for cut := 1; cut < len(full); cut++ {
		_, err := ReadFrame(bytes.NewReader(full[:cut]))
		if err == nil {
			t.Fatalf("frame cut to %d of %d bytes was accepted", cut, len(full))
		}
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("frame cut to %d of %d bytes: err = %v, want io.ErrUnexpectedEOF", cut, len(full), err)
		}
		if errors.Is(err, io.EOF) {
			// A clean io.EOF would be mistaken for an orderly close by the
			// server and client loops.
			t.Errorf("frame cut to %d bytes reads as a clean end of stream: %v", cut, err)
		}
	}
	// A reader that fails mid-payload reports the failure.
	boom := errors.New("boom")
	_, err = ReadFrame(io.MultiReader(bytes.NewReader(full[:headerSize+2]), frameErrReader{boom}))
	if !errors.Is(err, boom) {
		t.Errorf("failing reader: err = %v, want it wrapped", err)
	}
}

type frameErrReader struct{ err error }

func (r frameErrReader) Read([]byte) (int, error) { return 0, r.err }

func FuzzReadFrame(f *testing.F) {
	good, _ := AppendFrame(nil, Frame{Kind: KindOK, ID: 1, Payload: []byte(`{}`)})
	two, _ := AppendFrame(append([]byte(nil), good...), Frame{Kind: KindStdout, ID: 2, Payload: []byte("x")})
	f.Add(good)
	f.Add(two)
	f.Add([]byte{})
	f.Add(frameHeader(0, KindPing, 0))
	f.Add(frameHeader(MaxPayload+1, KindData, 5))
	f.Add(frameHeader(0xffffffff, KindData, 5))
	f.Add(append(frameHeader(4, KindError, 1), 'a', 'b'))
	f.Add(good[:headerSize-1])
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		for {
			before := r.Len()
			fr, err := ReadFrame(r)
			if err != nil {
				return
			}
			consumed := before - r.Len()
			if len(fr.Payload) > MaxPayload {
				t.Fatalf("accepted a %d-byte payload", len(fr.Payload))
			}
			if consumed != headerSize+len(fr.Payload) {
				t.Fatalf("consumed %d bytes for a %d-byte payload", consumed, len(fr.Payload))
			}
			re, err := AppendFrame(nil, fr)
			if err != nil {
				t.Fatalf("re-encoding an accepted frame: %v", err)
			}
			start := len(data) - before
			if !bytes.Equal(re, data[start:start+consumed]) {
				t.Fatalf("re-encoded frame differs from its input")
			}
		}
	})
}

// TestRecycledChunksAreReused streams 1,000 full output chunks the way the
// host's client reads them (ReadFrame, write, Recycle): the payloads come
// from a few reused buffers, not 32 MiB of fresh garbage. (The race
// detector's sync.Pool drops a quarter of what it is given, on purpose, so
// the bound leaves room for that.)
func TestRecycledChunksAreReused(t *testing.T) {
	const frames = 1000
	var stream []byte
	for i := range frames {
		var err error
		stream, err = AppendFrame(stream, Frame{Kind: KindStdout + Kind(i%2), ID: 1, Payload: bytes.Repeat([]byte{byte(i)}, ChunkSize)})
		if err != nil {
			t.Fatal(err)
		}
	}
	r := bytes.NewReader(stream)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range frames {
		f, err := ReadFrame(r)
		if err != nil || len(f.Payload) != ChunkSize || f.Payload[0] != byte(i) || f.Payload[ChunkSize-1] != byte(i) {
			t.Fatalf("frame %d: %d bytes, %v", i, len(f.Payload), err)
		}
		Recycle(f)
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > frames*ChunkSize/2 {
		t.Errorf("reading %d recycled chunks allocated %d bytes (a fresh chunk per frame is %d)", frames, got, frames*ChunkSize)
	}
}
