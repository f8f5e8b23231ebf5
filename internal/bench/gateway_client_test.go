package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// fakeResponses is POST /v1/responses of a gateway in front of up: it
// calls the upstream twice (the tool round), then answers the completed
// response, as JSON with Server-Timing or as a stream of words.
func fakeResponses(t *testing.T, up *GatewayUpstream) *httptest.Server {
	done := map[string]any{"status": "completed", "output": []any{
		map[string]any{"type": "code_interpreter_call", "status": "completed"},
		map[string]any{"type": "message", "content": []any{map[string]any{"text": gatewayBenchAnswer}}}}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Stream bool }
		json.NewDecoder(r.Body).Decode(&req)
		for _, role := range []string{"user", "tool"} {
			b, _ := json.Marshal(map[string]any{"messages": []any{map[string]string{"role": role}}})
			res, err := http.Post(up.URL+"/v1/chat/completions", "application/json", bytes.NewReader(b))
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
		if !req.Stream {
			w.Header().Set("Server-Timing", "total;dur=9.5, tools;dur=4, create;dur=1")
			json.NewEncoder(w).Encode(done)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for i, word := range strings.Fields(gatewayBenchAnswer) {
			fmt.Fprintf(w, "event: response.output_text.delta\ndata: {\"delta\":%q,\"sequence_number\":%d}\n\n", word, i)
		}
		b, _ := json.Marshal(map[string]any{"type": "response.completed", "response": done})
		fmt.Fprintf(w, "event: response.completed\ndata: %s\n\n", b)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestGatewayClient: a round splits its time by Server-Timing and the
// upstream's handler time; a streamed response is timed to its first
// delta and to response.completed; a wrong answer is an error.
func TestGatewayClient(t *testing.T) {
	up, err := StartGatewayUpstream()
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	srv := fakeResponses(t, up)
	c, err := newAPIClient(srv.URL, "cub_k", 2, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	ctx := context.Background()
	d, err := gatewayRound(ctx, c, up)
	if err != nil || len(d) != 7 || d[1] != 9500*time.Microsecond || d[3] != 4*time.Millisecond || d[4] != time.Millisecond ||
		d[0] <= 0 || d[2] <= 0 || d[5] != d[1]-d[2]-d[3] || d[6] != d[5]-d[4] {
		t.Fatalf("round: %v, %v", d, err)
	}
	first, total, err := gatewayStream(ctx, c)
	if err != nil || first <= 0 || total < first {
		t.Fatalf("stream: %v %v %v", first, total, err)
	}
	nf := httptest.NewServer(http.NotFoundHandler())
	defer nf.Close()
	bad, _ := newAPIClient(nf.URL, "", 1, time.Second)
	if _, _, err := gatewayStream(ctx, bad); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("stream from a 404: %v", err)
	}
}
