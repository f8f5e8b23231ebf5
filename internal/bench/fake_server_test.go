package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeServer serves the part of the computers API that 'bench api' and
// 'bench python' use: computers from a warm pool that refills after a
// delay, /metrics, execs and python calls. One fake serves both benches,
// so that they are tested against the same idea of the server.
type fakeServer struct {
	full int // the pool's size when full
	max  int // computers beyond this answer 429 (0: no limit)
	// coldDelay is how long the first python call in a computer that did
	// not come from the pool takes (its kernel starts).
	coldDelay time.Duration
	// blockAt is the exec or python call (counted together) that waits for
	// its request to end, after closing blocked.
	blockAt int64
	blocked chan struct{}

	mu    sync.Mutex
	next  int
	pool  int
	live  map[string]bool // id → its kernel is warm
	calls atomic.Int64
	// memoryCreates counts the creates that asked for memory_mb.
	memoryCreates map[int64]int
	// templateCreates counts the creates that named a template.
	templateCreates map[string]int
}

// fakeRefill is how long the fake pool takes to refill after a claim.
const fakeRefill = 2 * time.Millisecond

func newFakeServer(t *testing.T, f *fakeServer) *httptest.Server {
	f.live, f.pool = map[string]bool{}, f.full
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		fmt.Fprintf(w, "cubicle_pool_depth %d\n", f.pool)
	})
	mux.HandleFunc("GET /v1/computers", fakeAuth(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"object":"list","data":[]}`)
	}))
	mux.HandleFunc("POST /v1/computers", fakeAuth(f.create))
	mux.HandleFunc("DELETE /v1/computers/{id}", fakeAuth(f.delete))
	mux.HandleFunc("POST /v1/computers/{id}/exec", fakeAuth(f.exec))
	mux.HandleFunc("POST /v1/computers/{id}/python", fakeAuth(f.python))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// fakeAuth accepts the key "k" only.
func fakeAuth(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer k" {
			w.WriteHeader(401)
			io.WriteString(w, `{"error":{"code":"invalid_api_key","message":"no"}}`)
			return
		}
		h(w, r)
	}
}

func (f *fakeServer) create(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.max > 0 && len(f.live) >= f.max {
		w.WriteHeader(429)
		io.WriteString(w, `{"error":{"code":"capacity_exceeded","message":"full"}}`)
		return
	}
	var req struct {
		MemoryMB int64  `json:"memory_mb"`
		Template string `json:"template"`
	}
	json.NewDecoder(r.Body).Decode(&req)
	if req.Template != "" {
		if f.templateCreates == nil {
			f.templateCreates = map[string]int{}
		}
		f.templateCreates[req.Template]++
	}
	if req.MemoryMB > 0 {
		if f.memoryCreates == nil {
			f.memoryCreates = map[int64]int{}
		}
		f.memoryCreates[req.MemoryMB]++
	}
	f.next++
	id := fmt.Sprintf("cmp_%d", f.next)
	f.live[id] = f.pool > 0
	if f.pool > 0 {
		f.pool--
		time.AfterFunc(fakeRefill, func() {
			f.mu.Lock()
			f.pool = min(f.pool+1, f.full)
			f.mu.Unlock()
		})
	}
	w.WriteHeader(201)
	fmt.Fprintf(w, `{"id":%q,"object":"computer","status":"ready"}`, id)
}

func (f *fakeServer) delete(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.live[r.PathValue("id")]; !ok {
		w.WriteHeader(409)
		io.WriteString(w, `{"error":{"code":"computer_gone","message":"gone"}}`)
		return
	}
	delete(f.live, r.PathValue("id"))
	w.WriteHeader(204)
}

// block says whether this call is the one to hang; it then waits for the
// request to end.
func (f *fakeServer) block(r *http.Request) bool {
	if f.calls.Add(1) != f.blockAt {
		return false
	}
	close(f.blocked)
	<-r.Context().Done()
	return true
}

func (f *fakeServer) exec(w http.ResponseWriter, r *http.Request) {
	var req struct{ Argv []string }
	json.NewDecoder(r.Body).Decode(&req)
	if f.block(r) {
		return
	}
	out := ""
	if slices.Equal(req.Argv, echoArgv) {
		out = echoOutput
	}
	if r.Header.Get("Accept") == "text/event-stream" {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: stdout\ndata: {\"data\":%q}\n\n", out)
		w.(http.Flusher).Flush()
		io.WriteString(w, "event: exit\ndata: {\"exit_code\":0,\"stdout\":\"\"}\n\n")
		return
	}
	fmt.Fprintf(w, `{"exit_code":0,"stdout":%q,"stderr":"","timed_out":false}`, out)
}

func (f *fakeServer) python(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Cells []struct{ Code string }
	}
	json.NewDecoder(r.Body).Decode(&req)
	if f.block(r) {
		return
	}
	f.mu.Lock()
	warm, ok := f.live[r.PathValue("id")]
	f.live[r.PathValue("id")] = true
	f.mu.Unlock()
	if !ok || len(req.Cells) != 1 {
		w.WriteHeader(404)
		return
	}
	if !warm {
		time.Sleep(f.coldDelay)
	}
	text := "2"
	switch req.Cells[0].Code {
	case firstCell:
		text = describeText
	case kernelCPUCell:
		text = "0.5"
	case plotCell:
		text = "True"
	}
	out, _ := json.Marshal(map[string]any{"type": "execute_result", "text": text, "mime": "text/plain", "execution_count": 1})
	if r.Header.Get("Accept") == "text/event-stream" {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: output\ndata: {\"cell\":0,\"output\":%s}\n\n", out)
		w.(http.Flusher).Flush()
		io.WriteString(w, "event: result\ndata: {\"status\":\"ok\",\"cells\":[{\"index\":0,\"status\":\"ok\",\"execution_count\":1,\"outputs\":null}],\"cancelled\":false,\"timed_out\":false}\n\n")
		return
	}
	fmt.Fprintf(w, `{"status":"ok","cells":[{"index":0,"status":"ok","execution_count":1,"outputs":[%s]}],"cancelled":false,"timed_out":false,"duration_ms":1}`, out)
}

func (f *fakeServer) alive() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.live)
}
