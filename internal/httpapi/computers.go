package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/store"
)

func (a *API) createComputer(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	var body createBody
	if r.ContentLength != 0 {
		if err := decode(r, &body); err != nil {
			return err
		}
	}
	req, err := body.request()
	if err != nil {
		return err
	}
	v, err := a.comp.Create(r.Context(), p, req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, computerViewOf(v))
	return nil
}

// extendComputer moves a running computer's expiry to lifetime_seconds
// from now (clamped to the caps, as at create).
func (a *API) extendComputer(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	var body lifetimeBody
	if err := decode(r, &body); err != nil {
		return err
	}
	v, err := a.comp.Extend(r.Context(), p, r.PathValue("id"), durationOf(body.LifetimeSeconds))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, computerViewOf(v))
	return nil
}

// computerAction is a route that acts on the computer {id} without a
// body (pause, resume) and answers its view.
func computerAction(act func(ctx context.Context, p governance.Principal, id string) (computer.View, error)) handler {
	return func(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
		v, err := act(r.Context(), p, r.PathValue("id"))
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, computerViewOf(v))
		return nil
	}
}

func (a *API) listComputers(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	q := r.URL.Query()
	all := false
	switch q.Get("status") {
	case "", "alive":
	case "all":
		all = true
	default:
		return withParam("status", fmt.Errorf("%w: status must be all or alive", errBadRequest))
	}
	// The store reads the page (and one more row, to tell has_more).
	limit, desc, err := listRule.params(r)
	if err != nil {
		return err
	}
	after := q.Get("after")
	list, err := a.comp.ListPage(r.Context(), p, computer.ListQuery{All: all, ResponseID: q.Get("response_id"),
		After: after, Desc: desc, Limit: limit + 1})
	if errors.Is(err, computer.ErrCursor) {
		return withParam("after", fmt.Errorf("%w: no %q to list after", errBadRequest, after))
	}
	if err != nil {
		return err
	}
	views := computerViewsOf(list)
	writeJSON(w, http.StatusOK, pageBody(views[:min(limit, len(views))], func(v computerView) string { return v.ID }, len(views) > limit))
	return nil
}

func (a *API) getComputer(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	v, err := a.comp.Get(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, computerViewOf(v))
	return nil
}

func (a *API) deleteComputer(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	if err := a.comp.Delete(r.Context(), p, r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// sse writes Server-Sent Events, flushing each. Once open, it sends a
// comment every keepAlive so proxies do not cut a quiet, long call.
type sse struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	mu      sync.Mutex
	started bool
	stop    chan struct{}
	buf     []byte // the event being written (sendData)
	binary  bool   // the binary stream's frames instead (streamout.go)
}

const keepAlive = 15 * time.Second

func newSSE(w http.ResponseWriter) *sse { return &sse{w: w, rc: http.NewResponseController(w)} }

// open sends the headers now, so the client knows the call runs.
func (s *sse) open() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.start()
}

func (s *sse) start() {
	if s.started {
		return
	}
	if s.binary {
		s.w.Header().Set("Content-Type", binaryStream)
	} else {
		s.w.Header().Set("Content-Type", "text/event-stream")
	}
	s.w.Header().Set("Cache-Control", "no-cache")
	s.w.WriteHeader(http.StatusOK)
	s.rc.Flush()
	s.started = true
	s.stop = make(chan struct{})
	go s.keepAlive(s.stop)
}

func (s *sse) keepAlive(stop <-chan struct{}) {
	t := time.NewTicker(keepAlive)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			s.mu.Lock()
			if s.stop != nil && s.binary {
				s.w.Write(make([]byte, 5)) // a frame of type 0, empty
				s.rc.Flush()
			} else if s.stop != nil { // not closed while this tick waited for the lock
				fmt.Fprint(s.w, ": keep-alive\n\n")
				s.rc.Flush()
			}
			s.mu.Unlock()
		}
	}
}

func (s *sse) send(event string, v any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.start()
	if s.binary {
		s.sendFrame(event, v)
		return
	}
	b, _ := json.Marshal(v)
	fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", event, b)
	s.rc.Flush()
}

// sendID is send with an event id (a client's Last-Event-ID when it
// reconnects).
func (s *sse) sendID(event, id string, v any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.start()
	b, _ := json.Marshal(v)
	fmt.Fprintf(s.w, "id: %s\nevent: %s\ndata: %s\n\n", id, event, b)
	s.rc.Flush()
}

// close stops the keep-alives; the handler returns right after.
func (s *sse) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stop != nil {
		close(s.stop)
		s.stop = nil
	}
}

func (a *API) listFiles(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	req, err := walkQuery(r)
	if err != nil {
		return err
	}
	page, err := a.comp.WalkFiles(r.Context(), p, r.PathValue("id"), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, listingView(page))
	return nil
}

// putFile stores the body; a computer that goes during the upload ends it
// at once with 409 (the body's read is cut), however slowly the client sends.
func (a *API) putFile(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	if isTar(r) {
		return a.putTar(w, r, p)
	}
	ctx, cancel, err := a.comp.Watch(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	defer cancel()
	defer context.AfterFunc(ctx, func() { cutBody(w, r) })()
	written, err := a.comp.PutFile(ctx, p, r.PathValue("id"), r.PathValue("path"), r.Body)
	if cause := context.Cause(ctx); err != nil && errors.Is(cause, computer.ErrGone) {
		return cause
	}
	if err != nil {
		return bodyError(r, err)
	}
	writeJSON(w, http.StatusCreated, writtenView(written))
	return nil
}

func (a *API) getFile(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	switch format := r.URL.Query().Get("format"); format {
	case "tar":
		return a.getTar(w, r, p)
	case "", "raw":
	default:
		return withParam("format", fmt.Errorf("%w: format must be raw (the default) or tar, not %q", errBadRequest, format))
	}
	if stat, err := boolParam(r, "stat"); err != nil || stat {
		if err != nil {
			return err
		}
		return a.statFile(w, r, p)
	}
	return a.comp.GetFile(r.Context(), p, r.PathValue("id"), r.PathValue("path"), func(fi sandbox.FileInfo) io.Writer {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.FormatInt(fi.Size, 10))
		w.WriteHeader(http.StatusOK)
		return w
	})
}

func (a *API) deleteFile(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	if err := a.comp.DeleteFile(r.Context(), p, r.PathValue("id"), r.PathValue("path")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// maxUnixSeconds is the last second of the year 9999: times are stored in
// milliseconds, and a larger one would wrap.
const maxUnixSeconds = 253402300799

// timeParam reads a Unix-seconds query parameter.
func timeParam(r *http.Request, name string) (time.Time, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return time.Time{}, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > maxUnixSeconds {
		return time.Time{}, withParam(name, fmt.Errorf("%w: %s must be Unix seconds, from 0 to %d (the end of 9999)", errBadRequest, name, maxUnixSeconds))
	}
	return time.Unix(n, 0), nil
}

// timeRange reads the since and until parameters.
func timeRange(r *http.Request) (since, until time.Time, err error) {
	if since, err = timeParam(r, "since"); err == nil {
		until, err = timeParam(r, "until")
	}
	return since, until, err
}

func (a *API) usage(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	since, until, err := timeRange(r)
	if err != nil {
		return err
	}
	after, limit, err := rowPage(r)
	if err != nil {
		return err
	}
	rows, err := a.st.Usage().List(r.Context(), store.UsageFilter{OrgID: p.Org.ID, Since: since, Until: until, After: after, Limit: limit + 1})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rowPageOf(rows, limit, func(u store.UsageRow) int64 { return u.ID }))
	return nil
}

func (a *API) audit(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	since, until, err := timeRange(r)
	if err != nil {
		return err
	}
	after, limit, err := rowPage(r)
	if err != nil {
		return err
	}
	a.gov.FlushAudit() // the events of the calls this client made
	evs, err := a.st.Audit().List(r.Context(), store.EventFilter{OrgID: p.Org.ID, Type: r.URL.Query().Get("type"),
		Since: since, Until: until, After: after, Limit: limit + 1})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rowPageOf(evs, limit, func(e store.Event) int64 { return e.ID }))
	return nil
}

// rowPage reads the page of a list of numbered rows (usage, audit):
// ?after=<the last id of the page before>, ?limit=1..1000 (default 1000).
func rowPage(r *http.Request) (after int64, limit int, err error) {
	q := r.URL.Query()
	limit = 1000
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > 1000 {
			return 0, 0, withParam("limit", fmt.Errorf("%w: limit must be 1 to 1000, got %q", errBadRequest, v))
		}
	}
	if v := q.Get("after"); v != "" {
		if after, err = strconv.ParseInt(v, 10, 64); err != nil || after < 0 {
			return 0, 0, withParam("after", fmt.Errorf("%w: after must be the id of a row, got %q", errBadRequest, v))
		}
	}
	return after, limit, nil
}

// rowPageOf answers a page of rows, oldest first, read with one more than
// limit to tell whether there are more.
func rowPageOf[T any](rows []T, limit int, id func(T) int64) map[string]any {
	more := len(rows) > limit
	rows = rows[:min(limit, len(rows))]
	page := map[string]any{"object": "list", "data": rows, "has_more": more, "first_id": nil, "last_id": nil}
	if len(rows) > 0 {
		page["first_id"], page["last_id"] = id(rows[0]), id(rows[len(rows)-1])
	}
	return page
}
