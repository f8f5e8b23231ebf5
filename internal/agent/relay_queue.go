package agent

import "sync"

// boundedQueue is a FIFO whose producer never blocks: a push that would
// take the queued bytes past limit fails instead, and the caller applies
// its overflow policy (the kernel relay ends the relay). The consumer waits
// on ready, which is signalled after every push and on close.
type boundedQueue[T any] struct {
	limit int64
	ready chan struct{}

	mu     sync.Mutex
	items  []queued[T]
	head   int
	bytes  int64
	closed bool
}

type queued[T any] struct {
	v    T
	size int64
}

func newBoundedQueue[T any](limit int64) *boundedQueue[T] {
	return &boundedQueue[T]{limit: limit, ready: make(chan struct{}, 1)}
}

func (q *boundedQueue[T]) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// push queues v, accounted as size bytes. It reports false, queueing
// nothing, when the queue is closed or v does not fit.
func (q *boundedQueue[T]) push(v T, size int64) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || q.bytes+size > q.limit {
		return false
	}
	q.items = append(q.items, queued[T]{v, size})
	q.bytes += size
	q.signal()
	return true
}

// pop returns the oldest item (ok), or reports that the queue is empty and
// closed (done); with neither, wait on ready.
func (q *boundedQueue[T]) pop() (v T, ok, done bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.head == len(q.items) {
		return v, false, q.closed
	}
	it := q.items[q.head]
	q.items[q.head] = queued[T]{}
	q.head++
	q.bytes -= it.size
	switch {
	case q.head == len(q.items): // reuse the array from its start
		q.items, q.head = q.items[:0], 0
	case q.head > 256 && 2*q.head > len(q.items): // a queue that never empties
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	return it.v, true, false
}

// close refuses further pushes; what is queued can still be popped.
// discard also drops it.
func (q *boundedQueue[T]) close(discard bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	if discard {
		q.items, q.head, q.bytes = nil, 0, 0
	}
	q.signal()
}
