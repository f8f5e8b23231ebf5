package responses

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestReadSSE(t *testing.T) {
	body := ": comment\nevent: a\ndata: one\ndata: two\n\ndata:three\nid: 7\n\n\n\ndata: last"
	var got []string
	err := readSSE(strings.NewReader(body), 1<<20, func(ev, data string) error {
		got = append(got, ev+"|"+data)
		return nil
	})
	if err != nil || strings.Join(got, ",") != "a|one\ntwo,|three,|last" {
		t.Fatalf("events %q, err %v", got, err)
	}
	// errStopSSE ends the stream without an error.
	n := 0
	err = readSSE(strings.NewReader("data: 1\n\ndata: 2\n\n"), 1<<20, func(string, string) error { n++; return errStopSSE })
	if err != nil || n != 1 {
		t.Fatalf("stop: n %d, err %v", n, err)
	}
	long := "data: " + strings.Repeat("x", maxSSELine+1) + "\n\n"
	if err := readSSE(strings.NewReader(long), 4<<20, func(string, string) error { return nil }); !errors.Is(err, errSSELine) {
		t.Fatalf("long line: %v", err)
	}
	many := strings.Repeat("data: xxxxxxxx\n\n", 1000)
	if err := readSSE(strings.NewReader(many), 1000, func(string, string) error { return nil }); !errors.Is(err, errSSETotal) {
		t.Fatalf("long stream: %v", err)
	}
}

// recorder is a turnSink keeping what it was told.
type recorder struct{ log []string }

func (r *recorder) text(d string) { r.log = append(r.log, "text:"+d) }
func (r *recorder) call(i int, id, name, args string) {
	r.log = append(r.log, fmt.Sprintf("call%d:%s:%s:%s", i, id, name, args))
}

// TestChatStreamWithoutIndex: tool call fragments without an index (some
// servers) start a new call per id and continue the last one otherwise.
func TestChatStreamWithoutIndex(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, c := range []string{
			`{"choices":[{"index":0,"delta":{"content":"Hi"}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"c1","function":{"name":"f","arguments":"{\"a\""}}]}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":":1}"}}]}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"name":"g","arguments":"{}"}}]}}]}`,
			`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`,
		} {
			fmt.Fprintf(w, "data: %s\n\n", c)
		}
	}))
	defer srv.Close()
	u := &chatUpstream{httpUpstream{url: srv.URL, client: srv.Client(), timeout: 5 * time.Second, idle: time.Second,
		maxBytes: 1 << 20, stream: true}}
	rec := &recorder{}
	tu, err := u.complete(context.Background(), chatRequest{Model: "m"}, rec)
	if err != nil {
		t.Fatal(err)
	}
	// No [DONE], but a finish_reason: the answer is complete. The second
	// call came without an id and continues the first one's position.
	if tu.text != "Hi" || len(tu.calls) != 1 || tu.calls[0].Function.Arguments != `{"a":1}{}` || tu.usage.TotalTokens != 5 {
		t.Fatalf("turn %+v", tu)
	}
	if len(rec.log) != 4 || rec.log[0] != "text:Hi" || rec.log[1] != `call0:c1:f:{"a"` {
		t.Fatalf("sink %q", rec.log)
	}
}

func TestRoutes(t *testing.T) {
	rt, err := newRoutes(Config{Client: http.DefaultClient, Upstreams: []UpstreamConfig{
		{Name: "a", BaseURL: "http://a/v1", Models: []string{"llama3*", "qwen"}},
		{Name: "b", BaseURL: "http://b/v1", API: APIResponses, Models: []string{"llama3-special"}, Default: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	urlOf := func(model string) string {
		up, err := rt.route(model)
		if err != nil {
			return err.Error()
		}
		switch u := up.(type) {
		case *chatUpstream:
			return "chat " + u.url
		case *responsesUpstream:
			return "responses " + u.url
		}
		return "?"
	}
	for model, want := range map[string]string{"qwen": "chat http://a/v1", "llama3-8b": "chat http://a/v1",
		"llama3-special": "responses http://b/v1", "gpt-4o": "responses http://b/v1"} {
		if got := urlOf(model); got != want {
			t.Fatalf("%s: %s, want %s", model, got, want)
		}
	}
	if _, err := newRoutes(Config{Upstreams: []UpstreamConfig{{Name: "a", BaseURL: "http://a", Default: true},
		{Name: "b", BaseURL: "http://b", Default: true}}}); err == nil || !strings.Contains(err.Error(), "upstreams[1].default") {
		t.Fatalf("two defaults: %v", err)
	}
	if _, err := newRoutes(Config{Upstreams: []UpstreamConfig{{Name: "a", BaseURL: "http://a", Models: []string{"x"}},
		{Name: "b", BaseURL: "http://b", Models: []string{"x"}}}}); err == nil || !strings.Contains(err.Error(), "upstreams[1].models") {
		t.Fatalf("a model twice: %v", err)
	}
}
