package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// A computer's directory trees: GET /v1/computers/{id}/files (a page of a
// listing, recursive or not: listFiles in computers.go reads walkQuery)
// and GET /v1/computers/{id}/watch (a directory's changes as server-sent
// events). Their bodies are here rather than in models.go.

// walkQuery reads ?dir=&recursive=&limit=&after= of a listing.
func walkQuery(r *http.Request) (sandbox.WalkRequest, error) {
	q := r.URL.Query()
	req := sandbox.WalkRequest{Path: q.Get("dir"), After: q.Get("after")}
	var err error
	if req.Recursive, err = boolParam(r, "recursive"); err != nil {
		return req, err
	}
	limit, desc, err := pageRule{defLimit: sandbox.MaxWalkLimit, maxLimit: sandbox.MaxWalkLimit}.params(r)
	if err != nil {
		return req, err
	}
	if desc {
		return req, withParam("order", fmt.Errorf("%w: a listing is in name order only (order=asc)", errBadRequest))
	}
	req.Limit = limit
	return req, nil
}

// watchingEvent is the first event of a watch: what is watched.
type watchingEvent struct {
	Path      string `json:"path"`
	Dirs      int    `json:"dirs"`
	Truncated bool   `json:"truncated"`
}

// fileEvent is one change (events create, modify, delete, move,
// overflow).
type fileEvent struct {
	Type    string    `json:"type"`
	Path    string    `json:"path,omitempty"`
	From    string    `json:"from,omitempty"`
	Dir     bool      `json:"dir,omitempty"`
	Time    time.Time `json:"time"`
	Dropped int       `json:"dropped,omitempty"`
}

// watchEnd is the last event of a watch whose directory went.
type watchEnd struct {
	Reason string `json:"reason"`
}

// watchFiles is GET /v1/computers/{id}/watch?dir=&recursive=: a watching
// event, then an event per change until the client leaves, the directory
// goes (end) or the computer ends (error).
func (a *API) watchFiles(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	recursive, err := boolParam(r, "recursive")
	if err != nil {
		return err
	}
	ctx := r.Context()
	fw, err := a.comp.WatchFiles(ctx, p, r.PathValue("id"), sandbox.WatchRequest{Path: r.URL.Query().Get("dir"), Recursive: recursive})
	if err != nil {
		return err // a plain error status while nothing was sent yet
	}
	defer fw.Close()
	sse := newSSE(w)
	defer sse.close()
	dirs, truncated := fw.Dirs()
	sse.send("watching", watchingEvent{Path: fw.Path(), Dirs: dirs, Truncated: truncated})
	for {
		evs, err := fw.Next(ctx)
		for _, ev := range evs {
			sse.send(ev.Type, fileEvent(ev))
		}
		if err == nil {
			continue
		}
		var ended *sandbox.WatchEnded
		switch {
		case errors.As(err, &ended):
			sse.send("end", watchEnd{Reason: ended.Reason})
		case ctx.Err() == nil:
			sse.send("error", map[string]any{"error": streamError(ctx, err)})
		}
		return nil
	}
}
