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

// apiCreatePath times POST /v1/computers with a full warm pool, waits for
// the pool to refill (untimed), then times DELETE of that computer.
func apiCreatePath(c *apiClient, tr *tracker, pool *poolWaiter) *path {
	return &path{
		name: "api create and delete", required: true,
		rows: []rowDef{
			{RowAPICreate, "api      POST /v1/computers (warm pool)"},
			{RowAPIDelete, "api      DELETE /v1/computers/{id}"},
		},
		sample: func(ctx context.Context) (map[string]time.Duration, error) {
			if err := pool.wait(ctx); err != nil {
				return nil, err
			}
			id, dc, err := c.create(ctx)
			if err != nil {
				return nil, err
			}
			tr.add(id)
			// The claim started a refill (a cold start on the server);
			// let it finish so that the DELETE is timed on a quiet server.
			if err := pool.wait(ctx); err != nil {
				return nil, err
			}
			dd, err := c.delete(ctx, id)
			if err != nil {
				return nil, err
			}
			tr.remove(id)
			return map[string]time.Duration{RowAPICreate: dc, RowAPIDelete: dd}, nil
		},
	}
}

// apiExecPath times execs over HTTP into one computer made at set-up: a
// unary /bin/true round trip and /bin/echo's first streamed byte (SSE).
func apiExecPath(c *apiClient, tr *tracker, pool *poolWaiter) *path {
	var id string
	return &path{
		name: "api exec", required: true,
		rows: []rowDef{
			{RowAPIExecTrue, "api      exec /bin/true round trip"},
			{RowAPIExecEcho, "api      exec /bin/echo → first byte (SSE)"},
		},
		setup: func(ctx context.Context) (err error) {
			id, err = claim(ctx, c, tr, pool)
			return err
		},
		close: func(ctx context.Context) error {
			return deleteTracked(ctx, c, tr, id)
		},
		sample: func(ctx context.Context) (map[string]time.Duration, error) {
			rt, err := c.exec(ctx, id, trueArgv, "")
			if err != nil {
				return nil, fmt.Errorf("/bin/true: %w", err)
			}
			fb, err := c.execSSE(ctx, id, echoArgv, echoOutput)
			if err != nil {
				return nil, fmt.Errorf("/bin/echo: %w", err)
			}
			return map[string]time.Duration{RowAPIExecTrue: rt, RowAPIExecEcho: fb}, nil
		},
	}
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
