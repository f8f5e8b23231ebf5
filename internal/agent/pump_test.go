package agent

import (
	"bytes"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
)

// TestPumpFrames: a pump's first frame holds at most firstFrame bytes (a
// command that prints little never has a whole chunk allocated for it);
// once a frame filled that, a fast writer's frames grow towards
// protocol.OutputChunk; every byte arrives once, in order.
func TestPumpFrames(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	o := newOutPipe(r, true)
	var (
		sizes []int
		got   bytes.Buffer
		wg    sync.WaitGroup
	)
	wg.Add(1)
	go (&Server{}).pump(&wg, func(frame []byte) bool {
		sizes = append(sizes, len(frame)-protocol.HeaderRoom)
		got.Write(frame[protocol.HeaderRoom:])
		time.Sleep(2 * time.Millisecond) // a host that reads slower than the writer writes
		return true
	}, o)
	want := make([]byte, 8<<20)
	for i := range want {
		want[i] = byte(i * 7)
	}
	if _, err := io.Copy(w, bytes.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	w.Close()
	wg.Wait()
	r.Close()
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("%d bytes arrived, want the %d written", got.Len(), len(want))
	}
	largest := 0
	for _, n := range sizes {
		largest = max(largest, n)
	}
	if sizes[0] > firstFrame || largest <= firstFrame || largest > protocol.OutputChunk {
		t.Errorf("frames of %v bytes: want the first at most %d, a later one over it and none over %d", sizes, firstFrame, protocol.OutputChunk)
	}
}
