package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// GatewayUpstream is the zero-latency model server of 'cubicle-bench
// gateway': an OpenAI-compatible Chat Completions endpoint in this process
// that answers a conversation without a tool output with one
// code_interpreter call and a conversation with one with a short text,
// streamed (SSE chunks, the text word by word) when asked. It adds up the
// time its handler runs, so the bench can take the upstream's share out
// of a response's time.
type GatewayUpstream struct {
	URL  string // base URL, http://127.0.0.1:PORT/v1
	srv  *http.Server
	ln   net.Listener
	busy atomic.Int64 // nanoseconds spent in the handler
	hits atomic.Int64
}

// Scripted content of the bench's upstream.
const (
	gatewayBenchCode   = "print(1 + 1)"
	gatewayBenchAnswer = "The code printed 2, so 1 + 1 = 2."
)

// StartGatewayUpstream listens on 127.0.0.1 with a port the kernel picks.
func StartGatewayUpstream() (*GatewayUpstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench upstream: %w", err)
	}
	u := &GatewayUpstream{URL: "http://" + ln.Addr().String() + "/v1", ln: ln}
	u.srv = &http.Server{Handler: http.HandlerFunc(u.serve), ReadHeaderTimeout: 10 * time.Second}
	go u.srv.Serve(ln)
	return u, nil
}

// Close stops the server.
func (u *GatewayUpstream) Close() error {
	if err := u.srv.Close(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// take returns the handler time and calls since the last take, and
// resets both.
func (u *GatewayUpstream) take() (time.Duration, int) {
	return time.Duration(u.busy.Swap(0)), int(u.hits.Swap(0))
}

func (u *GatewayUpstream) serve(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	defer func() { u.busy.Add(int64(time.Since(start))); u.hits.Add(1) }()
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	var req struct {
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
		Stream bool `json:"stream"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 8<<20)).Decode(&req); err != nil || len(req.Messages) == 0 {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	callCode := req.Messages[len(req.Messages)-1].Role != "tool"
	usage := map[string]int{"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30}
	args, _ := json.Marshal(map[string]string{"code": gatewayBenchCode})
	if !req.Stream {
		msg := map[string]any{"role": "assistant", "content": gatewayBenchAnswer}
		if callCode {
			msg = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "call_bench",
				"type": "function", "function": map[string]any{"name": "code_interpreter", "arguments": string(args)}}}}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-bench", "object": "chat.completion",
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": "stop"}}, "usage": usage})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(delta map[string]any, finish any) {
		b, _ := json.Marshal(map[string]any{"id": "chatcmpl-bench", "object": "chat.completion.chunk",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
	if callCode {
		half := len(args) / 2
		chunk(map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"index": 0, "id": "call_bench",
			"type": "function", "function": map[string]any{"name": "code_interpreter", "arguments": string(args[:half])}}}}, nil)
		chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0,
			"function": map[string]any{"arguments": string(args[half:])}}}}, nil)
		chunk(map[string]any{}, "tool_calls")
	} else {
		for _, word := range strings.SplitAfter(gatewayBenchAnswer, " ") {
			chunk(map[string]any{"content": word}, nil)
		}
		chunk(map[string]any{}, "stop")
	}
	b, _ := json.Marshal(map[string]any{"id": "chatcmpl-bench", "object": "chat.completion.chunk", "choices": []any{}, "usage": usage})
	fmt.Fprintf(w, "data: %s\n\ndata: [DONE]\n\n", b)
}
