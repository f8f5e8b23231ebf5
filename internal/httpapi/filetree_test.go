package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/client"
)

// filePage is a page of GET …/files.
type filePage struct {
	Data []struct {
		Name string `json:"name"`
		Path string `json:"path"`
		Type string `json:"type"`
	} `json:"data"`
	Object    string  `json:"object"`
	Truncated bool    `json:"truncated"`
	FirstID   *string `json:"first_id"`
	LastID    *string `json:"last_id"`
	HasMore   bool    `json:"has_more"`
}

func (e *env) filePage(id, query string) filePage {
	e.t.Helper()
	r := e.do(e.admin, "GET", "/v1/computers/"+id+"/files?"+query, nil)
	if r.code != http.StatusOK {
		e.t.Fatalf("GET files?%s: %s", query, r)
	}
	var p filePage
	r.json(e.t, &p)
	if len(p.Data) > 0 && (p.FirstID == nil || *p.FirstID != p.Data[0].Path || p.LastID == nil || *p.LastID != p.Data[len(p.Data)-1].Path) {
		e.t.Fatalf("GET files?%s: first_id/last_id do not match the page: %+v", query, p)
	}
	return p
}

// paths pages through a listing with limit per page and returns every
// path (relative to /workspace/t) and the last page.
func (e *env) pagedPaths(id, query string, limit int) ([]string, filePage) {
	e.t.Helper()
	var out []string
	after := ""
	for pages := 0; ; pages++ {
		if pages > 100 {
			e.t.Fatal("more than 100 pages")
		}
		q := fmt.Sprintf("%s&limit=%d", query, limit)
		if after != "" {
			q += "&after=" + url.QueryEscape(after)
		}
		p := e.filePage(id, q)
		if len(p.Data) > limit {
			e.t.Fatalf("a page of %d entries for limit %d", len(p.Data), limit)
		}
		for _, d := range p.Data {
			out = append(out, strings.TrimPrefix(d.Path, "/workspace/t/"))
		}
		if !p.HasMore {
			return out, p
		}
		after = *p.LastID
	}
}

// A recursive listing is depth first, each directory's entries by name;
// pages of any size put together are the whole listing; symlinks are
// listed, never followed; an unreadable directory is listed, not its
// entries; a tree deeper than 32 levels is truncated; entries removed
// between two pages cost nothing; bad parameters are 400 naming them.
func TestFilesRecursiveListing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.create(e.admin, nil).ID
	e.sh(e.admin, id, `mkdir -p t/a/b/c t/sec && cd t && touch a/1 a/b/2 a/b/c/3 z 'a b' sec/hidden &&
		ln -s /etc a/etclink && ln -s .. a/b/up && chmod 000 sec`)
	want := []string{"a", "a/1", "a/b", "a/b/2", "a/b/c", "a/b/c/3", "a/b/up", "a/etclink", "a b", "sec", "z"}
	all := e.filePage(id, "dir=t&recursive=true")
	if all.HasMore || all.Truncated || all.Object != "list" {
		t.Fatalf("the whole listing: %+v", all)
	}
	var got []string
	for _, d := range all.Data {
		got = append(got, strings.TrimPrefix(d.Path, "/workspace/t/"))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("recursive listing:\n got %q\nwant %q", got, want)
	}
	types := map[string]string{}
	for _, d := range all.Data {
		types[strings.TrimPrefix(d.Path, "/workspace/t/")] = d.Type
	}
	if types["a/etclink"] != "symlink" || types["a/b/up"] != "symlink" || types["sec"] != "dir" || types["a/b/c/3"] != "file" {
		t.Fatalf("types: %v", types)
	}
	for _, limit := range []int{1, 2, 3, 5, 1000} {
		if got, last := e.pagedPaths(id, "dir=t&recursive=true", limit); !slices.Equal(got, want) || last.HasMore {
			t.Fatalf("pages of %d:\n got %q\nwant %q", limit, got, want)
		}
	}
	// Not recursive: the directory's own entries, by name, in pages.
	if got, _ := e.pagedPaths(id, "dir=t", 2); !slices.Equal(got, []string{"a", "a b", "sec", "z"}) {
		t.Fatalf("plain pages: %q", got)
	}

	// Removed between pages: the next page goes on after the cursor.
	p := e.filePage(id, "dir=t&recursive=true&limit=4") // a, a/1, a/b, a/b/2
	if *p.LastID != "/workspace/t/a/b/2" || !p.HasMore {
		t.Fatalf("first page: %+v", p)
	}
	e.sh(e.admin, id, "rm -r t/a/b")
	p = e.filePage(id, "dir=t&recursive=true&after="+url.QueryEscape(*p.LastID))
	if got := pathsOf(p); !slices.Equal(got, []string{"a/etclink", "a b", "sec", "z"}) || p.HasMore {
		t.Fatalf("after a removal: %q %+v", got, p)
	}

	// Deeper than 32 levels: the first 32 are listed, and it says so.
	e.sh(e.admin, id, "mkdir -p deep/"+strings.Repeat("d/", 40))
	p = e.filePage(id, "dir=deep&recursive=true")
	if len(p.Data) != 32 || !p.Truncated || p.HasMore {
		t.Fatalf("a tree of 40 levels: %d entries, truncated %v", len(p.Data), p.Truncated)
	}

	for q, param := range map[string]string{
		"dir=t&recursive=maybe":             "recursive",
		"dir=t&limit=0":                     "limit",
		"dir=t&limit=1001":                  "limit",
		"dir=t&order=desc":                  "order",
		"dir=t&recursive=true&after=%2Fetc": "after",
		"dir=t&after=other%2Fx":             "after",
		"dir=t&after=t%2Fa%2Fb":             "after", // not an entry of t itself without recursive
	} {
		r := e.do(e.admin, "GET", "/v1/computers/"+id+"/files?"+q, nil)
		if er := r.wantError(t, http.StatusBadRequest, ""); er.Error.Param == nil || *er.Error.Param != param {
			t.Errorf("files?%s: want param %q (%s)", q, param, r)
		}
	}
	e.do(e.admin, "GET", "/v1/computers/"+id+"/files?dir=etc&recursive=true", nil).wantError(t, http.StatusNotFound, "")
}

func pathsOf(p filePage) []string {
	var out []string
	for _, d := range p.Data {
		out = append(out, strings.TrimPrefix(d.Path, "/workspace/t/"))
	}
	return out
}

// watchEvent is an event of GET …/watch.
type watchEvent struct {
	name      string
	Type      string    `json:"type"`
	Path      string    `json:"path"`
	From      string    `json:"from"`
	Dir       bool      `json:"dir"`
	Time      time.Time `json:"time"`
	Dropped   int       `json:"dropped"`
	Dirs      int       `json:"dirs"`
	Truncated bool      `json:"truncated"`
	Reason    string    `json:"reason"`
}

// watcher is a test's open watch: its events arrive on events, and
// the stream's end closes it.
type watcher struct {
	events chan watchEvent
	cancel context.CancelFunc
}

func (e *env) watch(id, query string) (*watcher, *http.Response) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	req, _ := http.NewRequestWithContext(ctx, "GET", e.url+"/v1/computers/"+id+"/watch?"+query, nil)
	req.Header.Set("Authorization", "Bearer "+e.admin)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		res.Body.Close()
		cancel()
		return nil, res
	}
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		e.t.Fatalf("watch: Content-Type %q", ct)
	}
	w := &watcher{events: make(chan watchEvent, 100000), cancel: cancel}
	go func() {
		defer close(w.events)
		defer res.Body.Close()
		r := client.NewEventReader(res.Body, 0, 0)
		for {
			ev, err := r.Next() // the end, or the test's cancel
			if err != nil {
				return
			}
			var we watchEvent
			json.Unmarshal(ev.Data, &we)
			we.name = ev.Name
			w.events <- we
		}
	}()
	e.t.Cleanup(cancel)
	return w, res
}

// until reads events until one satisfies match (and returns it), failing
// after 20 s or at the stream's end.
func (w *watcher) until(t *testing.T, what string, match func(watchEvent) bool) watchEvent {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-w.events:
			if !ok {
				t.Fatalf("the watch ended before %s", what)
			}
			if match(ev) {
				return ev
			}
		case <-timeout:
			t.Fatalf("no event: %s", what)
		}
	}
}

func eventIs(name, path string) func(watchEvent) bool {
	return func(ev watchEvent) bool { return ev.name == name && ev.Path == path }
}

// A recursive watch reports creates, modifies, moves and deletes with
// their paths and times, in directories made after it started too; a
// directory moved out is no longer watched; a flood of events is bounded
// and the loss said by overflow events; deleting the directory ends it;
// a client that leaves frees its watch (at most 8 per computer).
func TestFilesWatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.create(e.admin, nil).ID
	e.sh(e.admin, id, "mkdir -p w/old w/flood")
	w, res := e.watch(id, "dir=w&recursive=true")
	if w == nil {
		t.Fatalf("watch: %d", res.StatusCode)
	}
	first := w.until(t, "watching", func(ev watchEvent) bool { return true })
	if first.name != "watching" || first.Path != "/workspace/w" || first.Dirs != 3 || first.Truncated {
		t.Fatalf("first event: %+v", first)
	}
	before := time.Now().Add(-time.Second)
	e.sh(e.admin, id, "echo hi > w/f1")
	ev := w.until(t, "create w/f1", eventIs("create", "/workspace/w/f1"))
	if ev.Type != "create" || ev.Time.Before(before) || ev.Time.After(time.Now().Add(time.Second)) {
		t.Fatalf("create event: %+v", ev)
	}
	w.until(t, "modify w/f1", eventIs("modify", "/workspace/w/f1"))
	e.sh(e.admin, id, "echo more >> w/old/g")
	w.until(t, "create in a subdirectory", eventIs("create", "/workspace/w/old/g"))
	e.sh(e.admin, id, "mkdir -p w/new/deeper && echo x > w/new/deeper/h")
	if ev := w.until(t, "create w/new", eventIs("create", "/workspace/w/new")); !ev.Dir {
		t.Fatalf("a directory's create without dir: %+v", ev)
	}
	w.until(t, "create in a directory made after the watch", eventIs("create", "/workspace/w/new/deeper/h"))
	e.sh(e.admin, id, "echo y > w/new/deeper/later")
	w.until(t, "modify in a directory made after the watch", eventIs("modify", "/workspace/w/new/deeper/later"))
	e.sh(e.admin, id, "mv w/f1 w/f2")
	if ev := w.until(t, "move f1 f2", eventIs("move", "/workspace/w/f2")); ev.From != "/workspace/w/f1" {
		t.Fatalf("move: %+v", ev)
	}
	e.sh(e.admin, id, "mv w/new w/renamed && echo z > w/renamed/deeper/after-rename")
	w.until(t, "a file in a moved directory, by its new path", eventIs("create", "/workspace/w/renamed/deeper/after-rename"))
	e.sh(e.admin, id, "rm w/f2")
	w.until(t, "delete f2", eventIs("delete", "/workspace/w/f2"))
	e.sh(e.admin, id, "mv w/old outside && echo q > outside/quiet && echo marker > w/marker")
	if ev := w.until(t, "w/old moved out is a delete", eventIs("delete", "/workspace/w/old")); !ev.Dir {
		t.Fatalf("moved out: %+v", ev)
	}
	w.until(t, "marker", func(ev watchEvent) bool {
		if strings.HasPrefix(ev.Path, "/workspace/outside") || strings.Contains(ev.Path, "quiet") {
			t.Fatalf("an event of a directory moved out: %+v", ev)
		}
		return ev.Path == "/workspace/w/marker"
	})

	// A flood: 20,000 files made and removed at once (40,000 events).
	// What passes is bounded (a burst of 1024, then 1000 a second); the
	// rest is counted in overflow events.
	start := time.Now()
	e.sh(e.admin, id, `/usr/bin/python3 -c "
import os
for i in range(20000):
    open('w/flood/n%d' % i, 'w').close(); os.remove('w/flood/n%d' % i)"`)
	passed, dropped, kernelOverflow := 0, 0, false
	w.until(t, "every event of the flood passed or counted", func(ev watchEvent) bool {
		switch {
		case (ev.name == "create" || ev.name == "delete") && strings.HasPrefix(ev.Path, "/workspace/w/flood/n"):
			passed++
		case ev.name == "overflow":
			dropped += ev.Dropped
			kernelOverflow = kernelOverflow || ev.Dropped == 0
		}
		return passed+dropped >= 40000 || kernelOverflow
	})
	bound := 1100 + int(1000*time.Since(start).Seconds())
	if dropped == 0 || passed >= 40000 || passed > bound {
		t.Fatalf("flood: %d events passed (at most %d), %d dropped", passed, bound, dropped)
	}
	if !kernelOverflow && passed+dropped != 40000 {
		t.Fatalf("flood: %d events passed + %d dropped, want 40000", passed, dropped)
	}
	t.Logf("flood: %d events passed, %d dropped, in %v", passed, dropped, time.Since(start))

	// Its directory deleted: the watch ends with end.
	e.sh(e.admin, id, "rm -r w")
	if ev := w.until(t, "end", func(ev watchEvent) bool { return ev.name == "end" }); ev.Reason != "deleted" {
		t.Fatalf("end: %+v", ev)
	}
	if _, ok := <-w.events; ok {
		for range w.events {
		}
	}

	// At most 8 watches per computer; a client that leaves frees its own.
	e.sh(e.admin, id, "mkdir -p v")
	var ws []*watcher
	for i := 0; i < 8; i++ {
		w, res := e.watch(id, "dir=v")
		if w == nil {
			t.Fatalf("watch %d: %d", i, res.StatusCode)
		}
		w.until(t, "watching", func(ev watchEvent) bool { return ev.name == "watching" })
		ws = append(ws, w)
	}
	if _, res := e.watch(id, "dir=v"); res == nil || res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a ninth watch: %v", res)
	}
	ws[0].cancel()
	eventually(t, 10*time.Second, "a watch freed by its client's leaving", func() bool {
		w, _ := e.watch(id, "dir=v")
		if w != nil {
			w.cancel()
		}
		return w != nil
	})
	for _, w := range ws[1:] {
		w.cancel()
	}
	eventually(t, 10*time.Second, "the watches freed", func() bool {
		w, _ := e.watch(id, "dir=v")
		if w != nil {
			w.cancel()
		}
		return w != nil
	})
	for q, code := range map[string]int{"dir=nope": 404, "dir=v&recursive=x": 400, "dir=..%2Fetc": 400} {
		if _, res := e.watch(id, q); res == nil || res.StatusCode != code {
			t.Errorf("watch?%s: %v, want %d", q, res, code)
		}
	}

	// The computer's end ends the stream with an error event.
	w, _ = e.watch(id, "dir=v")
	w.until(t, "watching", func(ev watchEvent) bool { return ev.name == "watching" })
	e.do(e.admin, "DELETE", "/v1/computers/"+id, nil)
	if ev := w.until(t, "error", func(ev watchEvent) bool { return ev.name == "error" }); ev.name != "error" {
		t.Fatalf("after delete: %+v", ev)
	}
}
