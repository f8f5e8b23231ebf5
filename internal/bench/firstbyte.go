package bench

import (
	"sync"
	"time"
)

// firstByteKeep bounds how much output FirstByte keeps for checking.
const firstByteKeep = 256

// FirstByte is an io.Writer that records when the first byte arrived and
// keeps the first bytes written. It is safe for concurrent use.
type FirstByte struct {
	mu  sync.Mutex
	at  time.Time
	buf []byte
}

// Write records the time of the first non-empty write.
func (f *FirstByte) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.at.IsZero() {
		f.at = now
	}
	if room := firstByteKeep - len(f.buf); room > 0 {
		f.buf = append(f.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// Time returns when the first byte was written, and false before that.
func (f *FirstByte) Time() (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.at, !f.at.IsZero()
}

// String returns the first bytes written.
func (f *FirstByte) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return string(f.buf)
}
