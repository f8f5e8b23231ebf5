package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	respgw "github.com/cubicle-sandbox/cubicle/internal/responses"
	"github.com/cubicle-sandbox/cubicle/internal/responses/upstreamtest"
)

// Background responses (background: true) through openai-go: real
// handlers, real computers, a scripted upstream whose answers may wait
// for the test (gated).

// gated answers with answer once gate is closed (or ends with the call).
func gated(gate <-chan struct{}, answer map[string]any) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		upstreamtest.WriteChatSSE(w, answer)
	}
}

// lastMessage is the role and text of the request's last message.
func lastMessage(req map[string]any) (role, content string) {
	msgs, _ := req["messages"].([]any)
	if len(msgs) == 0 {
		return "", ""
	}
	m, _ := msgs[len(msgs)-1].(map[string]any)
	role, _ = m["role"].(string)
	content, _ = m["content"].(string)
	return role, content
}

// responseComputers are the computers of response id, stopped ones too.
func (e *env) responseComputers(key, id string) []view {
	var l struct {
		Data []view `json:"data"`
	}
	e.do(key, "GET", "/v1/computers?status=all&response_id="+id, nil).json(e.t, &l)
	return l.Data
}

// waitResponse polls the response id until cond holds.
func waitResponse(t *testing.T, client openai.Client, id, what string, cond func(*responses.Response) bool) *responses.Response {
	t.Helper()
	var last *responses.Response
	eventually(t, 60*time.Second, what, func() bool {
		r, err := client.Responses.Get(t.Context(), id, responses.ResponseGetParams{})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		last = r
		return cond(r)
	})
	return last
}

var weatherTool = responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{Name: "get_weather",
	Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}, Strict: openai.Bool(false)}}

// seedLifetime is the seed's sentence (computers-api.md, "How long a
// computer lives") that TestOpenAIClientBackground asserts.
const seedLifetime = "A background run keeps its computer until the run is finished, has failed or has been cancelled. " +
	"If the run waits for the outcome of a function tool that you execute (`requires_action`), the computer disappears; the resumed run gets a new one."

// TestOpenAIClientBackground (seedLifetime). A background response answers at once
// (queued); polled, it is in progress while its upstream thinks, its
// computer alive; it ends waiting for the client's get_weather, and its
// computer is gone; resumed with the function's output, it runs in a new
// computer (x is not defined there) and the computer ends with the run.
func TestOpenAIClientBackground(t *testing.T) {
	e := newEnv(t, nil)
	gate := make(chan struct{})
	e.withGateway(newScripted(t, func(n int, req map[string]any) (int, any) {
		role, content := lastMessage(req)
		switch {
		case role == "user":
			return 200, toolCallAnswer("code_interpreter", `{"code":"x = 41\nprint(x)"}`)
		case strings.HasPrefix(content, "41"):
			return 200, gated(gate, toolCallAnswer("get_weather", `{"city":"Paris"}`))
		case content == "sunny":
			return 200, toolCallAnswer("code_interpreter", `{"code":"print('x' in dir())"}`)
		}
		return 200, chatAnswer(map[string]any{"role": "assistant", "content": "x survived: " + strings.TrimSpace(content)})
	}))
	_, key := e.newKey("", computerCaps)
	client := e.sdk(key)
	tools := []responses.ToolUnionParam{sdkTools[0], weatherTool}

	first, err := client.Responses.New(t.Context(), responses.ResponseNewParams{Model: "m", Tools: tools,
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("compute")}, Background: openai.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	if first.Status != responses.ResponseStatusQueued || !first.Background || len(first.Output) != 0 {
		t.Fatalf("the answer: %s", first.RawJSON())
	}
	// The code ran; the upstream thinks (gated): the run is in progress
	// and keeps its computer.
	running := waitResponse(t, client, first.ID, "the code ran", func(r *responses.Response) bool {
		return len(r.Output) == 1 && r.Output[0].Status == "completed"
	})
	cmp := running.Output[0].AsCodeInterpreterCall().ContainerID
	if running.Status != responses.ResponseStatusInProgress || e.get(key, cmp).Status != "ready" {
		t.Fatalf("%s\nin progress: %s, computer %s %s", seedLifetime, running.RawJSON(), cmp, e.get(key, cmp).Status)
	}
	close(gate)
	waiting := waitResponse(t, client, first.ID, "the run ends", func(r *responses.Response) bool {
		return r.Status != responses.ResponseStatusInProgress
	})
	call := waiting.Output[len(waiting.Output)-1].AsFunctionCall()
	if waiting.Status != responses.ResponseStatusCompleted || call.Name != "get_weather" || waiting.CompletedAt == 0 {
		t.Fatalf("waiting for get_weather: %s", waiting.RawJSON())
	}
	eventually(t, 30*time.Second, seedLifetime+"\nthe waiting run's computer disappears", func() bool { return e.get(key, cmp).Status == "destroyed" })

	resumed, err := client.Responses.New(t.Context(), responses.ResponseNewParams{Model: "m", Tools: tools,
		PreviousResponseID: openai.String(first.ID), Background: openai.Bool(true),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
			CallID: openai.String(call.CallID), Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String("sunny")}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	done := waitResponse(t, client, resumed.ID, "the resumed run ends", func(r *responses.Response) bool {
		return r.Status != responses.ResponseStatusQueued && r.Status != responses.ResponseStatusInProgress
	})
	second := done.Output[0].AsCodeInterpreterCall().ContainerID
	if done.Status != responses.ResponseStatusCompleted || done.OutputText() != "x survived: False" || second == cmp || second == "" {
		t.Fatalf("%s\nresumed (first computer %s): %s", seedLifetime, cmp, done.RawJSON())
	}
	eventually(t, 30*time.Second, seedLifetime+"\nthe finished run's computer ends", func() bool { return e.get(key, second).Status == "destroyed" })
	if l := e.responseComputers(key, resumed.ID); len(l) != 1 || l[0].ID != second {
		t.Fatalf("the resumed run's computers: %+v", l)
	}
}

// TestOpenAIClientBackgroundCancel: Cancel ends a running background
// response "cancelled" and its computer with it; cancelling again returns
// it as it is; a response created without background cannot be cancelled
// (400, OpenAI's sentence). Beyond gateway.max_background_responses_per_org
// a background request is a 429 until one ends; deleting a running one
// cancels it; background needs store.
func TestOpenAIClientBackgroundCancel(t *testing.T) {
	e := newEnv(t, nil)
	never := make(chan struct{})
	up := newScripted(t, func(n int, req map[string]any) (int, any) {
		role, content := lastMessage(req)
		switch {
		case role == "user" && content == "hold":
			return 200, toolCallAnswer("code_interpreter", `{"code":"print(1)"}`)
		case role == "tool":
			return 200, gated(never, chatAnswer(map[string]any{"role": "assistant", "content": "never"}))
		}
		return 200, chatAnswer(map[string]any{"role": "assistant", "content": "hello"})
	})
	e.withGatewayConfig(respgw.Config{UpstreamURL: up.srv.URL + "/v1", Model: "m", MaxBackgroundPerOrg: 1})
	_, key := e.newKey("", computerCaps)
	client := e.sdk(key)
	bg := func(input string) (*responses.Response, error) {
		return client.Responses.New(t.Context(), responses.ResponseNewParams{Model: "m", Tools: sdkTools,
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(input)}, Background: openai.Bool(true)})
	}
	held, err := bg("hold")
	if err != nil {
		t.Fatal(err)
	}
	running := waitResponse(t, client, held.ID, "the code ran", func(r *responses.Response) bool {
		return len(r.Output) == 1 && r.Output[0].Status == "completed"
	})
	cmp := running.Output[0].AsCodeInterpreterCall().ContainerID

	_, err = bg("hi")
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests || apiErr.Code != "too_many_background_responses" ||
		apiErr.Type != "rate_limit_error" || !strings.Contains(apiErr.Message, "max_background_responses_per_org") {
		t.Fatalf("a second background response of the organisation: %v", err)
	}

	cancelled, err := client.Responses.Cancel(t.Context(), held.ID)
	if err != nil {
		t.Fatal(err)
	}
	if cancelled.Status != responses.ResponseStatusCancelled || len(cancelled.Output) != 1 {
		t.Fatalf("cancelled: %s", cancelled.RawJSON())
	}
	eventually(t, 30*time.Second, seedLifetime+"\nthe cancelled run's computer ends", func() bool { return e.get(key, cmp).Status == "destroyed" })
	if again, err := client.Responses.Cancel(t.Context(), held.ID); err != nil || again.Status != responses.ResponseStatusCancelled {
		t.Fatalf("cancel again: %v %v", again, err)
	}
	if got, err := client.Responses.Get(t.Context(), held.ID, responses.ResponseGetParams{}); err != nil || got.Status != responses.ResponseStatusCancelled {
		t.Fatalf("get the cancelled response: %v %v", got, err)
	}

	// The slot is free again.
	hi, err := bg("hi")
	if err != nil {
		t.Fatal(err)
	}
	waitResponse(t, client, hi.ID, "the second run completes", func(r *responses.Response) bool { return r.OutputText() == "hello" })

	sync, err := client.Responses.New(t.Context(), responses.ResponseNewParams{Model: "m",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.Responses.Cancel(t.Context(), sync.ID)
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Message != "Cannot cancel a synchronous response." {
		t.Fatalf("cancel a synchronous response: %v", err)
	}
	if _, err := client.Responses.Cancel(t.Context(), "resp_000000000000000000000000"); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Fatalf("cancel an unknown response: %v", err)
	}
	// Deleting a running background response cancels it: it is gone.
	doomed, err := bg("hold")
	if err != nil {
		t.Fatal(err)
	}
	waitResponse(t, client, doomed.ID, "the code ran", func(r *responses.Response) bool { return len(r.Output) == 1 && r.Output[0].Status == "completed" })
	if err := client.Responses.Delete(t.Context(), doomed.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Responses.Get(t.Context(), doomed.ID, responses.ResponseGetParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Fatalf("a deleted background response: %v", err)
	}
	if _, err := bg("hi"); err != nil { // its slot is free
		t.Fatalf("after the delete: %v", err)
	}

	_, err = client.Responses.New(t.Context(), responses.ResponseNewParams{Model: "m", Store: openai.Bool(false), Background: openai.Bool(true),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Param != "store" {
		t.Fatalf("background without store: %v", err)
	}
}

// halfThenGate streams "one two " then, once gate is closed, "three".
func halfThenGate(gate <-chan struct{}) func(http.ResponseWriter, *http.Request) {
	chunk := func(text string, finish any) map[string]any {
		return map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk",
			"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": text}, "finish_reason": finish}}}
	}
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		upstreamtest.SSE(w, "", chunk("one ", nil))
		upstreamtest.SSE(w, "", chunk("two ", nil))
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
		upstreamtest.SSE(w, "", chunk("three", nil))
		upstreamtest.SSE(w, "", chunk("", "stop"))
		fmt.Fprint(w, "data: [DONE]\n\n")
	}
}

// TestOpenAIClientBackgroundStream: a background response created with
// stream: true streams; the client leaves mid-answer, the run goes on,
// and GetStreaming with starting_after resumes right after the last
// event it read, to response.completed; after the run, the whole stream
// reads again from the start. Only such a response streams again.
func TestOpenAIClientBackgroundStream(t *testing.T) {
	e := newEnv(t, nil)
	gate := make(chan struct{})
	e.withGateway(newScripted(t, func(n int, req map[string]any) (int, any) {
		if role, content := lastMessage(req); role == "user" && content == "count" {
			return 200, halfThenGate(gate)
		}
		return 200, chatAnswer(map[string]any{"role": "assistant", "content": "plain"})
	}))
	_, key := e.newKey("", computerCaps)
	client := e.sdk(key)

	ctx, leave := context.WithCancel(t.Context())
	stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "m", Background: openai.Bool(true),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("count")}})
	var id string
	var types []string
	last := int64(-1)
	for stream.Next() {
		ev := stream.Current()
		if ev.SequenceNumber != last+1 {
			t.Fatalf("sequence %d after %d", ev.SequenceNumber, last)
		}
		last = ev.SequenceNumber
		types = append(types, ev.Type)
		if ev.Type == "response.created" {
			id = ev.Response.ID
			if ev.Response.Status != responses.ResponseStatusQueued || !ev.Response.Background {
				t.Fatalf("created: %s", ev.RawJSON())
			}
		}
		if ev.Type == "response.output_text.delta" && ev.Delta == "two " {
			break
		}
	}
	stream.Close()
	leave()
	if id == "" || types[1] != "response.queued" || types[2] != "response.in_progress" {
		t.Fatalf("events before leaving: %q", types)
	}
	// The client left; the run did not.
	if r := waitResponse(t, client, id, "in progress", func(r *responses.Response) bool { return true }); r.Status != responses.ResponseStatusInProgress {
		t.Fatalf("after the client left: %s", r.RawJSON())
	}
	close(gate)

	resumed := client.Responses.GetStreaming(t.Context(), id, responses.ResponseGetParams{StartingAfter: openai.Int(last)})
	var text string
	var final responses.Response
	next := last + 1
	for resumed.Next() {
		ev := resumed.Current()
		if ev.SequenceNumber != next {
			t.Fatalf("resumed at %d, want %d", ev.SequenceNumber, next)
		}
		next++
		if ev.Type == "response.output_text.delta" {
			text += ev.Delta
		}
		if ev.Type == "response.completed" {
			final = ev.Response
		}
	}
	if err := resumed.Err(); err != nil {
		t.Fatal(err)
	}
	if text != "three" || final.Status != responses.ResponseStatusCompleted || final.OutputText() != "one two three" {
		t.Fatalf("resumed: text %q, final %s", text, final.RawJSON())
	}

	// After the run: everything again, from the start (GET ?stream=true).
	r := e.do(key, "GET", "/v1/responses/"+id+"?stream=true", nil)
	blocks := strings.Split(strings.TrimSpace(string(r.body)), "\n\n")
	if r.code != http.StatusOK || int64(len(blocks)) != next || !strings.HasPrefix(blocks[0], "event: response.created\n") ||
		!strings.HasPrefix(blocks[len(blocks)-1], "event: response.completed\n") {
		t.Fatalf("the whole stream again (%d events, want %d): %s", len(blocks), next, r)
	}

	plain, err := client.Responses.New(t.Context(), responses.ResponseNewParams{Model: "m",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	again := client.Responses.GetStreaming(t.Context(), plain.ID, responses.ResponseGetParams{})
	for again.Next() {
	}
	var apiErr *openai.Error
	if err := again.Err(); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Param != "stream" {
		t.Fatalf("streaming a foreground response: %v", err)
	}
	if r := e.do(key, "GET", "/v1/responses/"+id+"?stream=true&starting_after=x", nil); r.code != http.StatusBadRequest || !strings.Contains(string(r.body), `"param":"starting_after"`) {
		t.Fatalf("a bad starting_after: %s", r)
	}
}

// TestBackgroundRestart: background responses do not survive the server:
// at start, FailInterrupted marks the stored ones still queued or in
// progress failed (what `cubicle serve` does before serving).
func TestBackgroundRestart(t *testing.T) {
	e := newEnv(t, nil)
	never := make(chan struct{})
	up := newScripted(t, func(int, map[string]any) (int, any) {
		return 200, gated(never, chatAnswer(map[string]any{"role": "assistant", "content": "never"}))
	})
	e.withGateway(up)
	_, key := e.newKey("", computerCaps)
	r := e.do(key, "POST", "/v1/responses", map[string]any{"model": "m", "input": "hi", "background": true})
	var queued responseObj
	r.json(t, &queued)
	if r.code != http.StatusOK || queued.Status != "queued" {
		t.Fatalf("start: %s", r)
	}
	// A new server on the same database (the old one "crashed").
	g, err := respgw.New(respgw.Config{UpstreamURL: up.srv.URL + "/v1", Model: "m"}, respgw.Deps{Computers: e.mgr, Store: e.st.Responses()})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := g.FailInterrupted(t.Context()); err != nil || n != 1 {
		t.Fatalf("FailInterrupted: %d, %v", n, err)
	}
	e.setGateway(g)
	var after struct {
		Status string `json:"status"`
		Error  struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	e.do(key, "GET", "/v1/responses/"+queued.ID, nil).json(t, &after)
	if after.Status != "failed" || after.Error.Code != "server_error" || after.Error.Message != respgw.RestartedSentence {
		t.Fatalf("after the restart: %+v", after)
	}
}
