package bench

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
)

// tracker remembers the computers the bench created and has not deleted,
// so that they are deleted whatever happens.
type tracker struct {
	mu  sync.Mutex
	ids map[string]bool
}

func (t *tracker) add(id string) {
	t.mu.Lock()
	t.ids[id] = true
	t.mu.Unlock()
}

func (t *tracker) remove(id string) {
	t.mu.Lock()
	delete(t.ids, id)
	t.mu.Unlock()
}

func (t *tracker) list() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, 0, len(t.ids))
	for id := range t.ids {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// deleteAll deletes what is left, a few at a time, within cleanupTimeout,
// also after ctx was cancelled. A computer that is already gone counts as
// deleted.
func (t *tracker) deleteAll(c *apiClient) error {
	ids := t.list()
	if len(ids) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, 8)
	)
	for _, id := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			var err error
			for attempt := 0; attempt < 3; attempt++ {
				if _, err = c.delete(ctx, id); err == nil || isGone(err) {
					t.remove(id)
					return
				}
				if ctx.Err() != nil {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
			mu.Lock()
			errs = append(errs, fmt.Errorf("delete %s: %w", id, err))
			mu.Unlock()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// poolWaiter waits until the server's warm pool is full, so that a create
// claims from a full pool and the refill that a claim starts is not still
// running when the next path is timed.
type poolWaiter struct {
	c       *apiClient
	full    int
	timeout time.Duration
}

// poolPoll is how often /metrics is read while waiting.
const poolPoll = 5 * time.Millisecond

func (p *poolWaiter) wait(ctx context.Context) error {
	if p.full <= 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	last := -1
	for {
		n, err := p.c.poolDepth(ctx)
		if err == nil && n >= p.full {
			return nil
		}
		if err == nil {
			last = n
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return fmt.Errorf("waiting for the warm pool to refill: %w", err)
			}
			return fmt.Errorf("the warm pool did not refill within %v (depth %d of %d)", p.timeout, last, p.full)
		case <-time.After(poolPoll):
		}
	}
}

// discover sets full to the pool's depth once it stopped growing for a
// second (at most 30 s).
func (p *poolWaiter) discover(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	best, stable := -1, 0
	for time.Now().Before(deadline) && stable < 10 {
		n, err := p.c.poolDepth(ctx)
		if err != nil {
			return err
		}
		if n > best {
			best, stable = n, 0
		} else {
			stable++
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	p.full = best
	return nil
}

// claim creates the computer a path keeps for its samples and waits for
// the pool's refill, so that the first sample runs on a quiet server. The
// id is tracked (and returned) as soon as it is known, so that clean-up
// finds it even when the wait fails.
func claim(ctx context.Context, c *apiClient, tr *tracker, pool *poolWaiter) (string, error) {
	id, _, err := c.create(ctx)
	if err != nil {
		return "", err
	}
	tr.add(id)
	return id, pool.wait(ctx)
}

// deleteTracked deletes a computer the bench made ("" or gone: nothing to
// do).
func deleteTracked(ctx context.Context, c *apiClient, tr *tracker, id string) error {
	if id == "" {
		return nil
	}
	if _, err := c.delete(ctx, id); err != nil && !isGone(err) {
		return err
	}
	tr.remove(id)
	return nil
}

// ownComputer gives p a computer of its own for all its samples: claimed
// from the pool at set-up into *id, deleted at close.
func ownComputer(p *path, id *string, c *apiClient, tr *tracker, pool *poolWaiter) *path {
	p.setup = func(ctx context.Context) (err error) {
		*id, err = claim(ctx, c, tr, pool)
		return err
	}
	p.close = func(ctx context.Context) error { return deleteTracked(ctx, c, tr, *id) }
	return p
}
