package testbin

import (
	"sync"
	"testing"
)

// Repeat calls f over and over in a goroutine (a racing writer, a
// directory swapper) until the returned stop is called, which waits for
// the goroutine; an error from f is reported and ends the loop.
func Repeat(t testing.TB, f func() error) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			if err := f(); err != nil {
				t.Errorf("repeated call: %v", err)
				return
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}
