package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/log"
	"github.com/cubicle-sandbox/cubicle/internal/responses"
)

// backgroundResponse starts a background response (background: true):
// the answer is the queued response at once, or, with stream: true, its
// events as they come (the client may leave; the run goes on, and GET
// ?stream=true&starting_after=N resumes).
func backgroundResponse(w http.ResponseWriter, r *http.Request, g *responses.Gateway, p governance.Principal, run *responses.Run) error {
	body, err := g.Start(r.Context(), run)
	if err != nil {
		return err
	}
	if !run.Stream() {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.Write(body)
		return nil
	}
	f, err := g.Follow(r.Context(), p.Org.ID, run.ID(), -1)
	if err != nil {
		return err
	}
	return followResponse(w, r, f)
}

// followResponse streams a background response's events (SSE) until its
// last one, or until the client leaves (the run goes on).
func followResponse(w http.ResponseWriter, r *http.Request, f *responses.Follower) error {
	err := f.Each(r.Context(), startSSE(w))
	if errors.Is(err, responses.ErrEventsDropped) {
		log.From(r.Context()).InfoContext(r.Context(), "gateway: a background stream's reader fell behind its kept events")
	}
	return nil
}

// maxGetBody bounds the JSON body of a GET of a response ({"stream": true}).
const maxGetBody = 4 << 10

// responseStreamQuery reads GET /v1/responses/{id}'s stream (the query's,
// or the body's {"stream": bool}) and starting_after (-1: absent).
func responseStreamQuery(r *http.Request) (stream bool, after int, err error) {
	q := r.URL.Query()
	switch v := q.Get("stream"); v {
	case "", "false":
	case "true":
		stream = true
	default:
		return false, 0, withParam("stream", fmt.Errorf("%w: stream must be true or false, got %.32q", errBadRequest, v))
	}
	after = -1
	if v := q.Get("starting_after"); v != "" {
		n, perr := strconv.Atoi(v)
		if perr != nil || n < 0 {
			return false, 0, withParam("starting_after", fmt.Errorf("%w: starting_after must be a sequence number (an integer from 0), got %.32q", errBadRequest, v))
		}
		after = n
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, maxGetBody+1))
	switch {
	case err != nil:
		return false, 0, fmt.Errorf("%w: reading the body: %v", errBadRequest, err)
	case len(data) > maxGetBody:
		return false, 0, fmt.Errorf("%w: the body of a GET of a response is at most %d bytes", errTooLarge, maxGetBody)
	case len(bytes.TrimSpace(data)) == 0:
		return stream, after, nil
	}
	var body struct {
		Stream *bool `json:"stream"`
	}
	if err := decodeFrom(bytes.NewReader(data), &body); err != nil {
		return false, 0, err
	}
	if body.Stream != nil {
		stream = *body.Stream || stream
	}
	return stream, after, nil
}

// cancelResponse is POST /v1/responses/{id}/cancel: a background
// response of the key's organisation ends "cancelled" (one that already
// ended is returned as it is); a response created without background is
// a 400, as OpenAI's.
func (a *API) cancelResponse(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	if a.gateway == nil {
		return errNoGateway
	}
	body, err := a.gateway.Cancel(r.Context(), p.Org.ID, r.PathValue("id"))
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(body)
	return nil
}
