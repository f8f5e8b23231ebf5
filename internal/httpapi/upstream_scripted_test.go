package httpapi_test

import (
	"context"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/httpapi"
	"github.com/cubicle-sandbox/cubicle/internal/responses"
	"github.com/cubicle-sandbox/cubicle/internal/responses/upstreamtest"
)

// scripted is an OpenAI-compatible upstream answering from a script
// (upstreamtest.Handler: either API, whole or streamed). The script is
// written once for both APIs: step gets the request in Chat Completions
// form and answers a chat completion (chatAnswer, toolCallAnswer), or a
// func(http.ResponseWriter, *http.Request) writing whatever it likes
// (stalls, broken streams). raw keeps the requests as sent.
type scripted struct {
	mu       sync.Mutex
	calls    int
	requests []map[string]any
	raw      []map[string]any
	srv      *httptest.Server
}

func newScriptedAPI(t *testing.T, api string, step func(call int, req map[string]any) (int, any)) *scripted {
	s := &scripted{}
	s.srv = httptest.NewServer(upstreamtest.Handler(api, step, func(req, raw map[string]any) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.calls++
		s.requests = append(s.requests, req)
		s.raw = append(s.raw, raw)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *scripted) rawRequest(i int) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.raw[i]
}

// sse writes one event and flushes it; fragments cuts a string in pieces.
var (
	sse       = upstreamtest.SSE
	fragments = upstreamtest.Fragments
)

// withGatewayConfig wires a gateway with cfg (the test's model default),
// with the env's files service when it has one (the withFiles option).
func (e *env) withGatewayConfig(cfg responses.Config) {
	deps := responses.Deps{Computers: e.mgr, Store: e.st.Responses()}
	if e.files != nil { // a nil *files.Service is not a nil responses.Files
		deps.Files = e.files
	}
	g, err := responses.New(cfg, deps)
	if err != nil {
		e.t.Fatal(err)
	}
	e.setGateway(g)
}

// setGateway serves g; at cleanup (before the server's) it waits for the
// computers its responses delete after answering.
func (e *env) setGateway(g *responses.Gateway) {
	e.gw = g
	e.rewire(func(o *httpapi.Options) { o.Gateway = g })
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := g.Close(ctx); err != nil {
			e.t.Error(err)
		}
	})
}
