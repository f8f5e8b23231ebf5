package mcp

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// progressEvery is how often a tool call that runs on tells a client that
// asked for progress (a progressToken in the call's _meta) that it still
// runs: a client whose request timeout restarts on progress (the
// TypeScript SDK's resetTimeoutOnProgress) then waits for a long command
// instead of giving up on it after its timeout (60 s by default there).
var progressEvery atomic.Int64

func init() { progressEvery.Store(int64(5 * time.Second)) }

// heartbeat sends req's client a progress notification every
// progressEvery while the call runs, when it asked for progress; stop
// ends them before the result is sent.
func heartbeat(ctx context.Context, req *sdk.CallToolRequest) (stop func()) {
	tok := req.Params.GetProgressToken()
	if tok == nil || req.Session == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(time.Duration(progressEvery.Load()))
		defer t.Stop()
		start := time.Now()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			d := time.Since(start)
			// Progress is the seconds so far: it only grows, and there is
			// no total to give.
			req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: tok,
				Progress: d.Seconds(), Message: fmt.Sprintf("still running after %s", d.Round(time.Second))})
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

// progressRoutes hands the progress notifications of the calls a relay
// forwards to the local requests that asked for them, by token.
type progressRoutes struct{ m sync.Map } // token → *route

// route is one forwarded call's local request, until its result.
type route struct {
	mu    sync.Mutex
	local *sdk.CallToolRequest // nil once the call has its result
}

// forward registers local's token (if any) for the call's length and
// returns the params to send upstream (the token carried over) and the
// function that unregisters it, after which nothing more is passed on.
func (r *progressRoutes) forward(local *sdk.CallToolRequest, name string) (*sdk.CallToolParams, func()) {
	p := &sdk.CallToolParams{Name: name, Arguments: local.Params.Arguments}
	tok := local.Params.GetProgressToken()
	if tok == nil {
		return p, func() {}
	}
	p.SetProgressToken(tok)
	rt := &route{local: local}
	r.m.Store(tok, rt)
	return p, func() {
		r.m.CompareAndDelete(tok, rt)
		rt.mu.Lock()
		rt.local = nil
		rt.mu.Unlock()
	}
}

// notify passes an upstream progress notification to the local request
// it belongs to; one for no call in flight is dropped.
func (r *progressRoutes) notify(ctx context.Context, n *sdk.ProgressNotificationClientRequest) {
	v, ok := r.m.Load(n.Params.ProgressToken)
	if !ok {
		return
	}
	rt := v.(*route)
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.local != nil {
		rt.local.Session.NotifyProgress(ctx, n.Params)
	}
}
