package responses

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/responses/upstreamtest"
	"github.com/cubicle-sandbox/cubicle/internal/store"
	"github.com/cubicle-sandbox/cubicle/internal/tools"
)

// start begins body for p and starts it in the background.
func (h *harness) start(p governance.Principal, body string) (map[string]any, error) {
	h.t.Helper()
	r, err := h.g.Begin(context.Background(), p, h.request(body))
	if err != nil {
		return nil, err
	}
	if !r.Background() {
		h.t.Fatalf("%s: not a background run", body)
	}
	out, err := h.g.Start(context.Background(), r)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		h.t.Fatal(err)
	}
	return m, nil
}

// now is the response id as a GET shows it: live, else stored.
func (h *harness) now(id string) map[string]any {
	h.t.Helper()
	body, ok := h.g.Live(h.p.Org.ID, id)
	if !ok {
		sr, err := h.store.Get(context.Background(), h.p.Org.ID, id)
		if err != nil {
			h.t.Fatalf("%s: %v", id, err)
		}
		body = sr.Body
	}
	var m map[string]any
	json.Unmarshal(body, &m)
	return m
}

// waitStatus waits until the response id has status.
func (h *harness) waitStatus(id, status string) map[string]any {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		m := h.now(id)
		if m["status"] == status {
			return m
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%s: status %v, want %s", id, m["status"], status)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitOutput waits until the running response id shows n output items.
func (h *harness) waitOutput(id string, n int) {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if out, _ := h.now(id)["output"].([]any); len(out) == n {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%s: output %v, want %d items", id, h.now(id)["output"], n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// hang answers with one text fragment, then holds the answer open until
// the call is cancelled.
func hang(started chan<- struct{}) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		upstreamtest.SSE(w, "", map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": "x"}}}})
		if started != nil {
			started <- struct{}{}
		}
		<-r.Context().Done()
	}
}

// TestBackgroundRun: background: true answers at once with the queued
// response; the run goes on without the client, in progress while a tool
// runs (its computer alive), and ends completed, stored; its computer is
// deleted then. Cancelling it afterwards returns it as it ended.
func TestBackgroundRun(t *testing.T) {
	h := newHarness(t, APIChat, func(n int, _ map[string]any) (int, any) {
		if n == 1 {
			return 200, upstreamtest.ToolCallsAnswer("", upstreamtest.Call{ID: "c1", Name: tools.CodeInterpreterName, Args: `{"code":"work()"}`})
		}
		return 200, upstreamtest.TextAnswer("done")
	}, nil)
	running, release := make(chan struct{}), make(chan struct{})
	h.comp.run = func(ctx context.Context, _ string, _ json.RawMessage) (tools.Result, error) {
		close(running)
		<-release
		return tools.Result{Output: "worked"}, nil
	}
	queued, err := h.start(h.p, `{"input":"go","background":true,`+toolsBody+`}`)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := queued["id"].(string)
	if queued["status"] != "queued" || queued["background"] != true || queued["store"] != true {
		t.Fatalf("the answer: %v", queued)
	}
	<-running
	now := h.waitStatus(id, "in_progress")
	if _, _, deleted := h.comp.snapshot(); len(deleted) != 0 {
		t.Fatalf("the running run's computer was deleted: %q", deleted)
	}
	if out := now["output"].([]any); len(out) != 1 || out[0].(map[string]any)["status"] != "in_progress" {
		t.Fatalf("in progress: %v", now["output"])
	}
	if in := h.store.instanceOf(id); in != "srv_test" {
		t.Fatalf("the running response's server in the store: %q, want this one's", in)
	}
	close(release)
	done := h.waitStatus(id, "completed")
	if in := h.store.instanceOf(id); in != "" {
		t.Fatalf("the completed response still names a server: %q", in)
	}
	if out := done["output"].([]any); len(out) != 2 || done["completed_at"] == nil {
		t.Fatalf("completed: %v", done)
	}
	eventuallyDeleted(t, h, []string{"cmp_1"})
	if _, err := h.g.Follow(context.Background(), h.p.Org.ID, id, -1); paramOf(err) != "stream" {
		t.Fatalf("following a run created without stream: %v", err)
	}
	again, err := h.g.Cancel(context.Background(), h.p.Org.ID, id)
	if err != nil || !strings.Contains(string(again), `"status":"completed"`) {
		t.Fatalf("cancel after the end: %s, %v", again, err)
	}
	// The stored conversation continues it.
	if _, err := h.create(`{"input":"more","previous_response_id":"` + id + `"}`); err != nil {
		t.Fatalf("continuing: %v", err)
	}
}

// eventuallyDeleted waits until the fake computers deleted want.
func eventuallyDeleted(t *testing.T, h *harness, want []string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, _, deleted := h.comp.snapshot()
		if slices.Equal(deleted, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("deleted %q, want %q", deleted, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func paramOf(err error) string {
	var ge *Error
	if errors.As(err, &ge) {
		return ge.Param
	}
	return "(not a gateway error: " + func() string {
		if err == nil {
			return "nil"
		}
		return err.Error()
	}() + ")"
}

// TestBackgroundCancel: cancelling a running background response ends it
// "cancelled" (the message it was writing incomplete), stored so, with
// response.cancelled as the stream's last event; cancelling again returns
// the same. A response created without background cannot be cancelled.
func TestBackgroundCancel(t *testing.T) {
	started := make(chan struct{}, 1)
	h := newHarness(t, APIChat, func(int, map[string]any) (int, any) { return 200, hang(started) }, nil)
	queued, err := h.start(h.p, `{"input":"go","background":true,"stream":true}`)
	if err != nil {
		t.Fatal(err)
	}
	id := queued["id"].(string)
	<-started
	h.waitOutput(id, 1) // the message the upstream started
	f, err := h.g.Follow(context.Background(), h.p.Org.ID, id, -1)
	if err != nil {
		t.Fatal(err)
	}
	body, err := h.g.Cancel(context.Background(), h.p.Org.ID, id)
	if err != nil {
		t.Fatal(err)
	}
	var cancelled map[string]any
	json.Unmarshal(body, &cancelled)
	out := cancelled["output"].([]any)
	if cancelled["status"] != "cancelled" || cancelled["error"] != nil || len(out) != 1 || out[0].(map[string]any)["status"] != "incomplete" {
		t.Fatalf("cancelled: %s", body)
	}
	if stored := h.now(id); stored["status"] != "cancelled" {
		t.Fatalf("stored: %v", stored)
	}
	typs, seqs := follow(t, f)
	if typs[0] != "response.created" || typs[1] != "response.queued" || typs[2] != "response.in_progress" || typs[len(typs)-1] != "response.cancelled" {
		t.Fatalf("events %q", typs)
	}
	for i, s := range seqs {
		if s != i {
			t.Fatalf("sequence numbers %v", seqs)
		}
	}
	if again, err := h.g.Cancel(context.Background(), h.p.Org.ID, id); err != nil || !strings.Contains(string(again), `"status":"cancelled"`) {
		t.Fatalf("cancel again: %s, %v", again, err)
	}
	if _, err := h.g.Begin(context.Background(), h.p, h.request(`{"input":"x","previous_response_id":"`+id+`"}`)); paramOf(err) != "previous_response_id" {
		t.Fatalf("continuing a cancelled response: %v", err)
	}

	h2 := newHarness(t, APIChat, func(int, map[string]any) (int, any) { return 200, upstreamtest.TextAnswer("hi") }, nil)
	sync, err := h2.create(`{"input":"x"}`)
	if err != nil {
		t.Fatal(err)
	}
	_, err = h2.g.Cancel(context.Background(), h2.p.Org.ID, sync.ID)
	var ge *Error
	if !errors.As(err, &ge) || ge.Kind != errdefs.InvalidArgument || ge.Message != "Cannot cancel a synchronous response." {
		t.Fatalf("cancel a synchronous response: %v", err)
	}
	if _, err := h2.g.Cancel(context.Background(), h2.p.Org.ID, "resp_nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("cancel an unknown response: %v", err)
	}
}

// follow reads a follower to its end: the events' types and sequence numbers.
func follow(t *testing.T, f *Follower) (typs []string, seqs []int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := f.Each(ctx, func(typ string, data []byte) error {
		var ev struct {
			Type string `json:"type"`
			Seq  int    `json:"sequence_number"`
		}
		if err := json.Unmarshal(data, &ev); err != nil || ev.Type != typ {
			t.Fatalf("event %s %s: %v", typ, data, err)
		}
		typs, seqs = append(typs, typ), append(seqs, ev.Seq)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return typs, seqs
}

// TestBackgroundResume: a streamed background run's events are read
// again from any sequence number, during the run and after it ended.
func TestBackgroundResume(t *testing.T) {
	h := newHarness(t, APIChat, func(int, map[string]any) (int, any) {
		return 200, upstreamtest.TextAnswer("one two three four five")
	}, nil)
	queued, err := h.start(h.p, `{"input":"go","background":true,"stream":true}`)
	if err != nil {
		t.Fatal(err)
	}
	id := queued["id"].(string)
	f, err := h.g.Follow(context.Background(), h.p.Org.ID, id, -1)
	if err != nil {
		t.Fatal(err)
	}
	all, allSeqs := follow(t, f)
	if all[len(all)-1] != "response.completed" || allSeqs[len(allSeqs)-1] != len(all)-1 {
		t.Fatalf("events %q %v", all, allSeqs)
	}
	f, err = h.g.Follow(context.Background(), h.p.Org.ID, id, 4)
	if err != nil {
		t.Fatal(err)
	}
	tail, tailSeqs := follow(t, f)
	if !slices.Equal(tail, all[5:]) || tailSeqs[0] != 5 {
		t.Fatalf("after 4: %q %v, want %q", tail, tailSeqs, all[5:])
	}
	if m := h.now(id); m["status"] != "completed" {
		t.Fatalf("after the run: %v", m)
	}
	other := h.p
	other.Org.ID = "org_2"
	if _, err := h.g.Follow(context.Background(), other.Org.ID, id, -1); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another organisation: %v", err)
	}
}

// TestBackgroundRequestErrors: background needs store (400 naming store,
// or background on a deployment without a store), and the runs are
// bounded per organisation and per server (429).
func TestBackgroundRequestErrors(t *testing.T) {
	started := make(chan struct{}, 8)
	h := newHarness(t, APIChat, func(int, map[string]any) (int, any) { return 200, hang(started) }, func(c *Config) {
		c.MaxBackground, c.MaxBackgroundPerOrg = 2, 1
	})
	if _, err := h.g.Begin(context.Background(), h.p, h.request(`{"input":"go","background":true,"store":false}`)); paramOf(err) != "store" {
		t.Fatalf("store false: %v", err)
	}
	if _, err := h.start(h.p, `{"input":"go","background":true}`); err != nil {
		t.Fatal(err)
	}
	_, err := h.start(h.p, `{"input":"go","background":true}`)
	var ge *Error
	if !errors.As(err, &ge) || ge.Kind != errdefs.ResourceExhausted || ge.Code != "too_many_background_responses" ||
		!strings.Contains(ge.Message, "your organisation already runs 1 background responses") {
		t.Fatalf("over the organisation's bound: %v", err)
	}
	other := h.p
	other.Org.ID = "org_2"
	if _, err := h.start(other, `{"input":"go","background":true}`); err != nil {
		t.Fatalf("another organisation: %v", err)
	}
	third := h.p
	third.Org.ID = "org_3"
	if _, err := h.start(third, `{"input":"go","background":true}`); !errors.As(err, &ge) || !strings.Contains(ge.Message, "this server already runs 2") {
		t.Fatalf("over the server's bound: %v", err)
	}

	g, err := New(Config{UpstreamURL: h.up.URL, Model: "m"}, Deps{Computers: h.comp})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Begin(context.Background(), h.p, h.request(`{"input":"go","background":true}`)); paramOf(err) != "background" {
		t.Fatalf("without a store: %v", err)
	}
}

// TestBackgroundStop: at shutdown the running background responses end
// failed with ShutdownSentence and new ones are refused (503);
// FailInterrupted marks what a crash left queued or in progress failed.
func TestBackgroundStop(t *testing.T) {
	started := make(chan struct{}, 1)
	h := newHarness(t, APIChat, func(int, map[string]any) (int, any) { return 200, hang(started) }, nil)
	queued, err := h.start(h.p, `{"input":"go","background":true}`)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.g.Close(ctx); err != nil {
		t.Fatal(err)
	}
	failed := h.now(queued["id"].(string))
	if e, _ := failed["error"].(map[string]any); failed["status"] != "failed" || e["message"] != ShutdownSentence || e["code"] != "server_error" {
		t.Fatalf("after shutdown: %v", failed)
	}
	if _, err := h.start(h.p, `{"input":"go","background":true}`); !errors.Is(err, errdefs.Unavailable) {
		t.Fatalf("after shutdown: %v", err)
	}

	// A crash: the stored copy stays queued until the next start.
	body := `{"id":"resp_crashed","object":"response","status":"in_progress","background":true,"error":null}`
	h.store.Put(context.Background(), store.Response{ID: "resp_crashed", OrgID: h.p.Org.ID, Body: []byte(body)})
	if n, err := h.g.FailInterrupted(context.Background()); err != nil || n != 1 {
		t.Fatalf("FailInterrupted: %d, %v", n, err)
	}
	if m := h.now("resp_crashed"); m["status"] != "failed" || !strings.Contains(string(mustJSON(t, m["error"])), RestartedSentence) {
		t.Fatalf("after a restart: %v", m)
	}

	// Responses that name their server are failed once its lease lapsed,
	// not at a start (another replica may still run them).
	now := time.Now()
	h.store.beats = map[string]time.Time{"srv_live": now, "srv_dead": now.Add(-time.Minute)}
	for _, in := range []string{"srv_live", "srv_dead"} {
		body := `{"id":"resp_` + in + `","object":"response","status":"in_progress","background":true,"error":null}`
		h.store.Put(context.Background(), store.Response{ID: "resp_" + in, OrgID: h.p.Org.ID, Body: []byte(body), Instance: in})
	}
	if n, err := h.g.FailInterrupted(context.Background()); err != nil || n != 0 {
		t.Fatalf("FailInterrupted with responses of servers: %d, %v", n, err)
	}
	if n, err := h.g.FailOrphaned(context.Background(), now.Add(-30*time.Second), StoppedSentence); err != nil || n != 1 {
		t.Fatalf("FailOrphaned: %d, %v", n, err)
	}
	if m := h.now("resp_srv_dead"); m["status"] != "failed" || !strings.Contains(string(mustJSON(t, m["error"])), StoppedSentence) || h.store.instanceOf("resp_srv_dead") != "" {
		t.Fatalf("the dead server's response: %v", m)
	}
	if m := h.now("resp_srv_live"); m["status"] != "in_progress" {
		t.Fatalf("the live server's response: %v", m)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
