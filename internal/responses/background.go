package responses

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
	"github.com/cubicle-sandbox/cubicle/internal/log"
	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// Background runs (request background: true), OpenAI's background mode:
// Start stores the response "queued" and returns it at once; the run goes
// on without the client until it completes, fails or is cancelled
// (Cancel), and keeps its computer that long. The client polls it (Live,
// else the stored copy) and, when it was created with stream: true,
// reads its events again from any sequence number (Follow) while they are
// kept. Nothing survives the server: Stop fails the runs at shutdown,
// FailInterrupted what a crash left queued or in progress.

// Defaults of Config's background bounds.
const (
	DefaultMaxBackground       = 32
	DefaultMaxBackgroundPerOrg = 8
)

// Bounds of the events a streamed background run keeps for Follow.
const (
	// BackgroundEventBytes bounds one run's kept events (their JSON); the
	// oldest are dropped beyond it, the last one is always kept.
	BackgroundEventBytes = 4 << 20
	// BackgroundEventsKept is how long a streamed run's events stay after
	// it ended, at most maxEndedKept runs' worth.
	BackgroundEventsKept = 5 * time.Minute
	maxEndedKept         = 64
	// cancelWait bounds how long Cancel waits for the run to end.
	cancelWait = 30 * time.Second
)

// Sentences of background runs the server ended.
const (
	ShutdownSentence  = "The server shut down while this background response was running; it did not finish. Create it again."
	RestartedSentence = "The server restarted while this background response was running; it did not finish. Create it again."
	// StoppedSentence ends a run whose server (another replica) stopped.
	StoppedSentence = "The server running this background response stopped; it did not finish. Create it again."
)

// unfinished reports whether a response's status says it still runs.
func unfinished(status string) bool { return status == "queued" || status == "in_progress" }

// errCancelled is the cause of a run Cancel stopped: it ends "cancelled".
var errCancelled = errors.New("the background response was cancelled")

// bgRun is one background run, running or (streamed) recently ended.
type bgRun struct {
	id, org string
	stream  bool // created with stream: true: its events are kept
	run     *Run
	cancel  context.CancelCauseFunc
	done    chan struct{} // closed once the run ended and was stored

	mu      sync.Mutex
	body    json.RawMessage // the response as a GET shows it now
	events  []bgEvent       // kept events; events[i] has sequence number first+i
	first   int
	size    int
	wake    chan struct{} // closed and replaced at every change
	ended   bool
	endedAt time.Time
}

type bgEvent struct {
	typ  string
	data []byte
}

// backgroundRuns are the gateway's background runs.
type backgroundRuns struct {
	mu      sync.Mutex
	runs    map[string]*bgRun // running, and streamed ones ended less than BackgroundEventsKept ago
	ended   []*bgRun          // those ended ones, oldest first
	running int
	perOrg  map[string]int
	stopped bool
	wg      sync.WaitGroup
}

// Background reports whether the request asked to run in the background.
func (r *Run) Background() bool { return r.plan.background }

// checkBackground refuses a background request that would not be stored:
// polling and resuming read the store.
func checkBackground(pl *plan, stored bool, asked *bool) error {
	switch {
	case !pl.background || stored:
		return nil
	case asked != nil && !*asked:
		return invalid("store", "Background mode requires store=true: a background response is polled, cancelled and resumed from the store")
	}
	return invalid("background", "background responses need stored responses, which this deployment does not keep")
}

// Start runs r (Begin'd with background: true) in the background: the
// response is stored "queued" and returned (its JSON); the run goes on
// without ctx's cancellation (its values, the logger, stay). Beyond
// Config.MaxBackground runs on the server or MaxBackgroundPerOrg of the
// organisation it is a 429; once Stop ran, a 503. Do not Close r: the run
// does when it ends.
func (g *Gateway) Start(ctx context.Context, r *Run) (json.RawMessage, error) {
	r.resp.Status = "queued"
	body, err := json.Marshal(r.resp)
	if err != nil {
		return nil, err
	}
	b := &bgRun{id: r.resp.ID, org: r.p.Org.ID, stream: r.plan.stream, run: r, body: body,
		done: make(chan struct{}), wake: make(chan struct{})}
	ctx, b.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	if err := g.admit(b); err != nil {
		b.cancel(err)
		return nil, err
	}
	if err := r.put(ctx); err != nil {
		b.cancel(err)
		g.release(b)
		return nil, fmt.Errorf("gateway: store the background response: %w", err)
	}
	go g.runBackground(ctx, b)
	return body, nil
}

// admit counts b among the running runs, within the bounds.
func (g *Gateway) admit(b *bgRun) error {
	maxRuns, perOrg := g.cfg.MaxBackground, g.cfg.MaxBackgroundPerOrg
	bg := &g.bg
	bg.mu.Lock()
	defer bg.mu.Unlock()
	switch {
	case bg.stopped:
		return &Error{Kind: errdefs.Unavailable, Code: "shutting_down", Message: "the server is shutting down"}
	case bg.running >= maxRuns:
		return &Error{Kind: errdefs.ResourceExhausted, Code: "too_many_background_responses", Message: fmt.Sprintf(
			"this server already runs %d background responses (gateway.max_background_responses); retry when one has finished", maxRuns)}
	case bg.perOrg[b.org] >= perOrg:
		return &Error{Kind: errdefs.ResourceExhausted, Code: "too_many_background_responses", Message: fmt.Sprintf(
			"your organisation already runs %d background responses on this server (gateway.max_background_responses_per_org); wait for one to finish or cancel one", perOrg)}
	}
	if bg.runs == nil {
		bg.runs, bg.perOrg = map[string]*bgRun{}, map[string]int{}
	}
	bg.runs[b.id] = b
	bg.running++
	bg.perOrg[b.org]++
	bg.wg.Add(1)
	return nil
}

// release uncounts the ended run b; a streamed one stays (for Follow) for
// BackgroundEventsKept, at most maxEndedKept of them.
func (g *Gateway) release(b *bgRun) {
	bg := &g.bg
	bg.mu.Lock()
	defer bg.mu.Unlock()
	bg.running--
	if bg.perOrg[b.org]--; bg.perOrg[b.org] == 0 {
		delete(bg.perOrg, b.org)
	}
	delete(bg.runs, b.id)
	if b.stream && b.ended {
		bg.runs[b.id] = b
		bg.ended = append(bg.ended, b)
	}
	bg.expire(time.Now())
	bg.wg.Done()
}

// expire forgets the ended runs past their time or count (bg.mu held).
func (bg *backgroundRuns) expire(now time.Time) {
	for len(bg.ended) > 0 && (len(bg.ended) > maxEndedKept || now.Sub(bg.ended[0].endedAt) > BackgroundEventsKept) {
		delete(bg.runs, bg.ended[0].id)
		bg.ended = bg.ended[1:]
	}
}

// lookup is org's background run id (nil: none running or kept).
func (g *Gateway) lookup(org, id string) *bgRun {
	bg := &g.bg
	bg.mu.Lock()
	defer bg.mu.Unlock()
	bg.expire(time.Now())
	if b := bg.runs[id]; b != nil && b.org == org {
		return b
	}
	return nil
}

// runBackground runs b to its end: Do stores the final state (a failure
// as failed, a cancel as cancelled); then the run is released and its
// computer deleted.
func (g *Gateway) runBackground(ctx context.Context, b *bgRun) {
	r := b.run
	defer func() {
		if v := recover(); v != nil {
			log.From(ctx).ErrorContext(ctx, "gateway: a background response panicked", "response", b.id, "panic", v)
			r.resp.Status, r.resp.Error = "failed", map[string]string{"code": "server_error", "message": "The response failed; see the server log."}
			r.keep(ctx)
			r.emit("response.failed", map[string]any{"response": r.snapshot()})
		}
		b.end()
		g.release(b)
		r.Close(ctx) // the computer, in the background
		close(b.done)
	}()
	_, err := r.Do(ctx, b.record)
	if err != nil && ctx.Err() == nil {
		if k, _ := errdefs.Of(err); k == errdefs.Unknown {
			log.From(ctx).ErrorContext(ctx, "gateway: a background response failed", "response", b.id, "err", err)
		}
	}
}

// record keeps one event of the run (called by the run, one at a time):
// its JSON when the run streams, and the response as it now is at the
// events that change it as a GET shows it.
func (b *bgRun) record(ev Event) error {
	var data, body []byte
	if b.stream {
		data, _ = json.Marshal(ev)
	}
	switch ev.Type {
	case "response.in_progress", "response.output_item.added", "response.output_item.done",
		"response.completed", "response.incomplete", "response.failed", "response.cancelled":
		body, _ = json.Marshal(b.run.resp)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if body != nil {
		b.body = body
	}
	if data != nil {
		b.events = append(b.events, bgEvent{typ: ev.Type, data: data})
		b.size += len(data)
		for b.size > BackgroundEventBytes && len(b.events) > 1 {
			b.size -= len(b.events[0].data)
			b.events[0] = bgEvent{}
			b.events = b.events[1:]
			b.first++
		}
	}
	b.changed()
	return nil
}

// changed wakes the followers (b.mu held).
func (b *bgRun) changed() {
	close(b.wake)
	b.wake = make(chan struct{})
}

// end marks the run ended: its followers stop after its last event.
func (b *bgRun) end() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ended, b.endedAt = true, time.Now()
	b.changed()
}

// snapshot is the response as a GET shows it now.
func (b *bgRun) snapshot() json.RawMessage {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.body
}

// Live is org's background response id as it is now, while it runs (or,
// streamed, shortly after); false: GET the stored copy.
func (g *Gateway) Live(org, id string) (json.RawMessage, bool) {
	if b := g.lookup(org, id); b != nil {
		return b.snapshot(), true
	}
	return nil, false
}

// Cancel cancels org's background response id (POST
// /v1/responses/{id}/cancel) and returns it: a running one ends
// "cancelled" (its items in progress incomplete, its computer deleted);
// one that already ended is returned as it ended (cancelling is
// idempotent); a response created without background is a 400, as
// OpenAI's; an unknown one is store.ErrNotFound.
func (g *Gateway) Cancel(ctx context.Context, org, id string) (json.RawMessage, error) {
	if b := g.lookup(org, id); b != nil {
		b.cancel(errCancelled)
		t := time.NewTimer(cancelWait)
		defer t.Stop()
		select {
		case <-b.done:
		case <-t.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return b.snapshot(), nil
	}
	body, background, err := g.stored(ctx, org, id)
	switch {
	case err != nil:
		return nil, err
	case !background:
		return nil, invalid("", "Cannot cancel a synchronous response.")
	}
	return body, nil
}

// stored is org's stored response id (store.ErrNotFound: none) and
// whether it was created with background.
func (g *Gateway) stored(ctx context.Context, org, id string) (json.RawMessage, bool, error) {
	if g.responses == nil {
		return nil, false, &Error{Kind: errdefs.NotFound, Code: "not_found", Message: fmt.Sprintf("response %q was not found", id)}
	}
	sr, err := g.responses.Get(ctx, org, id)
	if err != nil {
		return nil, false, err
	}
	var head struct {
		Background bool `json:"background"`
	}
	err = json.Unmarshal(sr.Body, &head)
	return sr.Body, err == nil && head.Background, nil
}

// Follower reads a background run's events (Follow).
type Follower struct {
	b    *bgRun
	next int // the next sequence number to send
}

// Follow reads the events of org's background response id after
// sequence number after (-1: from the first), GET
// /v1/responses/{id}?stream=true&starting_after=N. Refused (400, naming
// the reason): a response not created with background and stream, one
// whose events are no longer kept (BackgroundEventsKept after it ended,
// or from before a restart), events before the oldest kept one.
func (g *Gateway) Follow(ctx context.Context, org, id string, after int) (*Follower, error) {
	const param = "stream"
	b := g.lookup(org, id)
	if b == nil {
		_, background, err := g.stored(ctx, org, id)
		switch {
		case err != nil:
			return nil, err
		case !background:
			return nil, invalid(param, "response %q was not created with background=true: only a background response created with stream=true can be streamed again", id)
		}
		return nil, invalid(param, "the events of response %q are no longer kept (they are kept while it runs and %v after it ended, and not across a restart): GET it without stream", id, BackgroundEventsKept)
	}
	if !b.stream {
		return nil, invalid(param, "response %q was created without stream=true: only a background response created with stream=true can be streamed again; GET it without stream", id)
	}
	b.mu.Lock()
	first := b.first
	b.mu.Unlock()
	if after+1 < first {
		return nil, invalid("starting_after", "the events of response %q up to sequence number %d are no longer kept (at most %d bytes of events are); resume after %d or later", id, first-1, BackgroundEventBytes, first-1)
	}
	return &Follower{b: b, next: after + 1}, nil
}

// ErrEventsDropped ends a follower that fell so far behind that the
// events it had yet to read were dropped (BackgroundEventBytes).
var ErrEventsDropped = errors.New("gateway: the follower fell behind the kept events")

// Each sends the events (their type and JSON) from the follower's place
// on, as they come, until the run's last event was sent (nil), ctx ends
// or send fails.
func (f *Follower) Each(ctx context.Context, send func(typ string, data []byte) error) error {
	b := f.b
	for {
		b.mu.Lock()
		if f.next < b.first {
			b.mu.Unlock()
			return ErrEventsDropped
		}
		var evs []bgEvent
		if i := f.next - b.first; i < len(b.events) {
			evs = b.events[i:] // never changed in place, only dropped or appended to
		}
		ended, wake := b.ended, b.wake
		b.mu.Unlock()
		for _, ev := range evs {
			if err := send(ev.typ, ev.data); err != nil {
				return err
			}
			f.next++
		}
		if len(evs) > 0 {
			continue
		}
		if ended {
			return nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Stop fails the running background runs (at shutdown: the server keeps
// nothing running across a restart) and refuses new ones; they end with
// ShutdownSentence. Close waits for them.
func (g *Gateway) Stop() {
	bg := &g.bg
	bg.mu.Lock()
	defer bg.mu.Unlock()
	bg.stopped = true
	for _, b := range bg.runs {
		b.cancel(&Error{Kind: errdefs.Unavailable, Code: "server_error", Message: ShutdownSentence})
	}
}

// FailInterrupted marks the stored background responses still queued or
// in progress failed (RestartedSentence): their server stopped without
// ending them (a crash; a shutdown ends them itself). Call it at start,
// before serving. It returns how many it marked.
func (g *Gateway) FailInterrupted(ctx context.Context) (int, error) {
	if g.responses == nil {
		return 0, nil
	}
	list, err := g.responses.Unfinished(ctx)
	if err != nil {
		return 0, fmt.Errorf("gateway: read the interrupted background responses: %w", err)
	}
	// Those that name their server are FailOrphaned's, once its lease
	// lapsed: it may be another replica's, still running.
	list = slices.DeleteFunc(list, func(sr store.Response) bool { return sr.Instance != "" })
	return g.failAll(ctx, list, RestartedSentence)
}

// FailOrphaned marks failed, with sentence, the background responses
// whose server last beat before before (store.Responses.Orphaned): no
// server runs them any more. It returns how many it failed.
func (g *Gateway) FailOrphaned(ctx context.Context, before time.Time, sentence string) (int, error) {
	if g.responses == nil {
		return 0, nil
	}
	list, err := g.responses.Orphaned(ctx, before)
	if err != nil {
		return 0, fmt.Errorf("gateway: read the orphaned background responses: %w", err)
	}
	return g.failAll(ctx, list, sentence)
}

// failAll stores each unfinished response of list failed with sentence,
// no longer run by any server.
func (g *Gateway) failAll(ctx context.Context, list []store.Response, sentence string) (int, error) {
	n := 0
	for _, sr := range list {
		var resp Response
		if json.Unmarshal(sr.Body, &resp) != nil || !unfinished(resp.Status) {
			continue // "status" of an item, or a body of another shape
		}
		resp.Status, resp.Error = "failed", map[string]string{"code": "server_error", "message": sentence}
		var err error
		if sr.Body, err = json.Marshal(resp); err != nil {
			return n, err
		}
		sr.Items, sr.Instance = outputItems(resp.Output), ""
		if err := g.responses.Put(ctx, sr); err != nil {
			return n, fmt.Errorf("gateway: fail the interrupted background response %s: %w", sr.ID, err)
		}
		n++
	}
	return n, nil
}
