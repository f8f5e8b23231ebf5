package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// Walk answers one page of a directory listing (see sandbox.FileTree).
func (c *Client) Walk(ctx context.Context, req sandbox.WalkRequest) (sandbox.WalkPage, error) {
	var page protocol.WalkPage
	err := c.call(ctx, protocol.KindWalk, protocol.WalkRequest{Path: req.Path, After: req.After, Limit: req.Limit, Recursive: req.Recursive}, &page)
	out := sandbox.WalkPage{Entries: make([]sandbox.FileInfo, len(page.Entries)), More: page.More, Truncated: page.Truncated}
	for i, fi := range page.Entries {
		out.Entries[i] = sandbox.FileInfo(fi)
	}
	return out, err
}

const (
	// hostWatchQueue bounds the events waiting for a watch's consumer on
	// the host; past it they are dropped and counted (an overflow event).
	hostWatchQueue = 4096
	// watchCloseWait bounds how long Close waits for the agent's end.
	watchCloseWait = 5 * time.Second
)

// FileWatch is a watch of a computer's directory (sandbox.FileWatch).
// The control channel's read loop hands it its frames without waiting
// (a stream with deliver): a consumer that does not keep up loses events,
// counted in an overflow event, and never holds the channel back.
type FileWatch struct {
	c       *Client
	id      uint32
	started protocol.WatchStarted
	first   chan protocol.Frame // the answer: KindOK or KindError
	// answered: the answer was delivered (read loop only).
	answered bool

	mu      sync.Mutex
	queue   []sandbox.FileEvent
	dropped int
	ended   error // *sandbox.WatchEnded or the agent's error, once it ended
	wake    chan struct{}
	done    chan struct{} // closed at the end

	stopOnce sync.Once
	stopCtx  func() bool
}

var _ sandbox.FileWatch = (*FileWatch)(nil)

// WatchFiles watches a directory and returns once it is watched.
// Cancelling ctx ends the watch.
func (c *Client) WatchFiles(ctx context.Context, req sandbox.WatchRequest) (*FileWatch, error) {
	w := &FileWatch{c: c, first: make(chan protocol.Frame, 1), wake: make(chan struct{}, 1), done: make(chan struct{})}
	w.id = c.register(&stream{gone: make(chan struct{}), deliver: w.deliver})
	if err := c.sendJSON(protocol.KindWatch, w.id, protocol.WatchRequest{Path: req.Path, Recursive: req.Recursive}); err != nil {
		c.release(w.id)
		return nil, err
	}
	var f protocol.Frame
	select {
	case f = <-w.first:
	case <-c.done:
		c.release(w.id)
		return nil, c.gone()
	case <-ctx.Done():
		w.Close()
		return nil, ctx.Err()
	}
	if err := decodeReply(f, &w.started); err != nil {
		c.release(w.id)
		return nil, err
	}
	w.stopCtx = context.AfterFunc(ctx, w.stop)
	return w, nil
}

// deliver takes the watch's frames from the read loop; it never blocks.
func (w *FileWatch) deliver(f protocol.Frame) {
	switch f.Kind {
	case protocol.KindOK:
		if !w.answered {
			w.answered = true
			w.first <- f
		}
		return
	case protocol.KindWatchEvents:
		var b protocol.WatchBatch
		if json.Unmarshal(f.Payload, &b) != nil {
			w.finish(fmt.Errorf("%w: malformed watch events from agent", protocol.ErrInternal))
			return
		}
		w.mu.Lock()
		for _, ev := range b.Events {
			switch {
			case ev.Type == protocol.EventOverflow && ev.Dropped > 0:
				w.dropped += ev.Dropped
			case len(w.queue) >= hostWatchQueue:
				w.dropped++
			default:
				w.queue = append(w.queue, sandbox.FileEvent(ev))
			}
		}
		w.mu.Unlock()
		w.signal()
	case protocol.KindDataEnd:
		var end protocol.WatchEnd
		json.Unmarshal(f.Payload, &end)
		w.finish(&sandbox.WatchEnded{Reason: end.Reason})
	case protocol.KindError:
		if !w.answered { // the answer: it failed to start
			w.answered = true
			w.first <- f
			return
		}
		w.finish(decodeReply(f, nil))
	}
}

func (w *FileWatch) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// finish records the end once.
func (w *FileWatch) finish(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended != nil {
		return
	}
	w.ended = err
	close(w.done)
	w.signal()
}

// Path is the watched directory.
func (w *FileWatch) Path() string { return w.started.Path }

// Dirs is how many directories are watched, and whether some were left out.
func (w *FileWatch) Dirs() (int, bool) { return w.started.Dirs, w.started.Truncated }

// Next waits for the next events (with an overflow event last when some
// were dropped); at the end *sandbox.WatchEnded, or the computer's end.
func (w *FileWatch) Next(ctx context.Context) ([]sandbox.FileEvent, error) {
	for {
		w.mu.Lock()
		evs := w.queue
		if w.dropped > 0 {
			evs = append(evs, sandbox.FileEvent{Type: protocol.EventOverflow, Dropped: w.dropped, Time: time.Now().UTC()})
		}
		w.queue, w.dropped = nil, 0
		ended := w.ended
		w.mu.Unlock()
		if len(evs) > 0 {
			return evs, nil
		}
		if ended != nil {
			return nil, ended
		}
		select {
		case <-w.wake:
		case <-w.c.done:
			select {
			case <-w.done: // it ended before the channel did
				continue
			default:
			}
			return nil, w.c.gone()
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// stop asks the agent to end the watch (once).
func (w *FileWatch) stop() {
	w.stopOnce.Do(func() { w.c.send(protocol.KindWatchStop, w.id, nil) })
}

// Close ends the watch and waits for the agent's end (at most
// watchCloseWait, or until the channel is gone).
func (w *FileWatch) Close() {
	if w.stopCtx != nil {
		w.stopCtx()
	}
	w.stop()
	t := time.NewTimer(watchCloseWait)
	defer t.Stop()
	select {
	case <-w.done:
	case <-w.c.done:
	case <-t.C:
	}
	w.c.release(w.id)
}
