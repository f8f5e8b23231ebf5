package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/responses"
	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// createResponse is POST /v1/responses (non-streaming).
func (a *API) createResponse(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	g := a.gateway
	if g == nil {
		return errNoGateway
	}
	var req responses.Request
	if err := decode(r, &req); err != nil {
		return err
	}
	req.Origin = origin(r)
	run, err := g.Begin(r.Context(), p, &req)
	if err != nil {
		return err
	}
	if run.Background() {
		return backgroundResponse(w, r, g, p, run)
	}
	// Deferred: the response's computer is deleted once the answer (or
	// the stream's last event) was written, whatever happened.
	defer run.Close(r.Context())
	if run.Stream() {
		return streamResponse(w, r, run)
	}
	resp, err := run.Do(r.Context(), nil)
	// Where the time went (upstream, tools, computer create, gateway), for
	// operators and the gateway bench.
	w.Header().Set("Server-Timing", run.Timing().ServerTiming())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, resp)
	// The answer leaves now, before the deferred delete starts.
	http.NewResponseController(w).Flush()
	return nil
}

// streamResponse sends the response's events as SSE; an error after the
// stream started ends it with response.failed (sent by the gateway).
func streamResponse(w http.ResponseWriter, r *http.Request, run *responses.Run) error {
	send := startSSE(w)
	_, err := run.Do(r.Context(), func(ev responses.Event) error {
		data, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		return send(ev.Type, data)
	})
	streamFailed(r.Context(), err, "streamed response failed")
	return nil
}

// startSSE answers 200 with an event stream and returns the function
// writing (and flushing) one event.
func startSSE(w http.ResponseWriter) func(typ string, data []byte) error {
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc.Flush()
	return func(typ string, data []byte) error {
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, data); err != nil {
			return err
		}
		return rc.Flush()
	}
}

// getResponse is GET /v1/responses/{id}: a response of the key's
// organisation (404 otherwise): a background one as it is now, else the
// stored one; with stream=true (in the query, or {"stream": true} as
// openai-go's GetStreaming sends it) the events of a background response
// created with stream, after ?starting_after=N (background.go).
func (a *API) getResponse(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	id := r.PathValue("id")
	stream, after, err := responseStreamQuery(r)
	if err != nil {
		return err
	}
	g := a.gateway
	switch {
	case stream && g == nil:
		return errNoGateway
	case stream:
		f, err := g.Follow(r.Context(), p.Org.ID, id, after)
		if err != nil {
			return err
		}
		return followResponse(w, r, f)
	}
	body, live := json.RawMessage(nil), false
	if g != nil {
		body, live = g.Live(p.Org.ID, id)
	}
	if !live {
		sr, err := a.st.Responses().Get(r.Context(), p.Org.ID, id)
		if err != nil {
			return err
		}
		body = sr.Body
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(body)
	return nil
}

// listResponses is GET /v1/responses without an Upgrade: a page of the
// organisation's stored responses (OpenAI's page parameters and shape:
// ?limit=1..100 (default 20), ?after=<id>, ?order=desc|asc, newest first),
// read from the store a page at a time.
func (a *API) listResponses(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	limit, desc, err := openAIPage.params(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	list, err := a.st.Responses().List(r.Context(), p.Org.ID, q.Get("after"), limit+1, desc)
	if errors.Is(err, store.ErrNotFound) {
		return withParam("after", fmt.Errorf("%w: no response %.64q to list after", errBadRequest, q.Get("after")))
	}
	if err != nil {
		return err
	}
	more := len(list) > limit
	list = list[:min(limit, len(list))]
	data := make([]json.RawMessage, len(list))
	for i, sr := range list {
		data[i] = sr.Body
	}
	page := map[string]any{"object": "list", "data": data, "has_more": more, "first_id": nil, "last_id": nil}
	if len(list) > 0 {
		page["first_id"], page["last_id"] = list[0].ID, list[len(list)-1].ID
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// deleteResponse is DELETE /v1/responses/{id}; a background response
// still running is cancelled first.
func (a *API) deleteResponse(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	id := r.PathValue("id")
	if a.gateway != nil {
		if _, live := a.gateway.Live(p.Org.ID, id); live {
			if _, err := a.gateway.Cancel(r.Context(), p.Org.ID, id); err != nil {
				return err
			}
		}
	}
	if err := a.st.Responses().Delete(r.Context(), p.Org.ID, id); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "response", "deleted": true})
	return nil
}

// origin is scheme://host of r, as the client addressed the server.
func origin(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}
