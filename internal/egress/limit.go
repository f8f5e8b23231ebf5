package egress

import (
	"context"
	"io"
	"sync"

	"golang.org/x/time/rate"
)

// Limiter bounds each organisation's internet (the per-organisation rate
// limit of docs/network.md). An error from AllowConn means the limiter
// could not answer: the connection goes through, and that is logged.
type Limiter interface {
	// AllowConn reports whether org may open one more connection now.
	AllowConn(org string) (bool, error)
	// Bytes is org's byte rate limiter; nil: unlimited.
	Bytes(org string) *rate.Limiter
}

// RateLimits is the in-process Limiter: token buckets per organisation.
type RateLimits struct {
	connRate  rate.Limit // 0: connections unlimited
	connBurst int
	byteRate  rate.Limit // 0: bytes unlimited
	byteBurst int

	mu    sync.Mutex
	conns map[string]*rate.Limiter
	bytes map[string]*rate.Limiter
}

// NewRateLimits limits every organisation to connsPerSecond new
// connections (bursts of connBurst) and bytesPerSecond each way summed
// over its computers; 0 leaves either unlimited.
func NewRateLimits(connsPerSecond float64, connBurst int, bytesPerSecond int64) *RateLimits {
	return &RateLimits{connRate: rate.Limit(connsPerSecond), connBurst: max(connBurst, 1),
		byteRate: rate.Limit(bytesPerSecond), byteBurst: int(max(bytesPerSecond, 64<<10)),
		conns: map[string]*rate.Limiter{}, bytes: map[string]*rate.Limiter{}}
}

func (l *RateLimits) AllowConn(org string) (bool, error) {
	if l.connRate == 0 {
		return true, nil
	}
	return bucket(&l.mu, l.conns, org, l.connRate, l.connBurst).Allow(), nil
}

func (l *RateLimits) Bytes(org string) *rate.Limiter {
	if l.byteRate == 0 {
		return nil
	}
	return bucket(&l.mu, l.bytes, org, l.byteRate, l.byteBurst)
}

// bucket returns key's limiter in m, making it the first time.
func bucket(mu *sync.Mutex, m map[string]*rate.Limiter, key string, r rate.Limit, burst int) *rate.Limiter {
	mu.Lock()
	defer mu.Unlock()
	b := m[key]
	if b == nil {
		b = rate.NewLimiter(r, burst)
		m[key] = b
	}
	return b
}

// limitedReader waits for the byte limiter after each read, so a flow's
// copy runs at most at the organisation's rate.
type limitedReader struct {
	ctx context.Context
	r   io.Reader
	l   *rate.Limiter
}

func (lr limitedReader) Read(p []byte) (int, error) {
	if len(p) > lr.l.Burst() {
		p = p[:lr.l.Burst()]
	}
	n, err := lr.r.Read(p)
	if n > 0 {
		if werr := lr.l.WaitN(lr.ctx, n); werr != nil && err == nil {
			err = werr
		}
	}
	return n, err
}
