package httpapi_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	respgw "github.com/cubicle-sandbox/cubicle/internal/responses"
)

// Drop-in compatibility of the Responses gateway with what OpenAI's
// clients send and read: every field of the Response object, every create
// parameter, item_reference input items.

// responseFields are the fields of OpenAI's Response object the gateway
// returns (openai-go's responses.Response, less the ones named in
// docs/gateway.md as not returned).
var responseFields = []string{"id", "object", "created_at", "completed_at", "status", "background", "error",
	"incomplete_details", "instructions", "metadata", "model", "output", "parallel_tool_calls", "temperature",
	"tool_choice", "tools", "top_p", "max_output_tokens", "max_tool_calls", "previous_response_id", "reasoning",
	"service_tier", "text", "top_logprobs", "truncation", "usage", "user", "store", "conversation", "prompt",
	"prompt_cache_key", "prompt_cache_retention", "safety_identifier"}

// echoScript answers every request with the text "Hello".
func echoScript(t *testing.T, api string) *scripted {
	return newScriptedAPI(t, api, func(int, map[string]any) (int, any) {
		return 200, chatAnswer(map[string]any{"role": "assistant", "content": "Hello"})
	})
}

func newEchoEnv(t *testing.T, api string) (*env, *scripted, string) {
	e := newEnv(t, nil)
	up := echoScript(t, api)
	e.withGatewayConfig(respgw.Config{Upstreams: []respgw.UpstreamConfig{{Name: "u", BaseURL: up.srv.URL + "/v1",
		API: api, Default: true}}})
	_, key := e.newKey("", computerCaps)
	return e, up, key
}

// TestOpenAIClientEveryResponseField: openai-go reads every Response
// field, with the request's values after a previous_response_id
// follow-up, and OpenAI's defaults when the request set none.
func TestOpenAIClientEveryResponseField(t *testing.T) {
	e, _, key := newEchoEnv(t, respgw.APIChat)
	client := e.sdk(key)
	first, err := client.Responses.New(t.Context(), responses.ResponseNewParams{Model: "m",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Hi")}})
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(first.RawJSON()), &raw); err != nil {
		t.Fatal(err)
	}
	for _, f := range responseFields {
		if _, ok := raw[f]; !ok {
			t.Errorf("the response has no %q: %s", f, first.RawJSON())
		}
	}
	if first.Temperature != 1 || first.TopP != 1 || first.Truncation != "disabled" || first.ServiceTier != "default" ||
		first.Text.Format.Type != "text" || first.Text.Verbosity != "medium" || first.Background ||
		first.JSON.PreviousResponseID.Raw() != "null" || first.JSON.MaxOutputTokens.Raw() != "null" ||
		first.JSON.User.Raw() != "null" || first.JSON.Reasoning.Raw() != `{"effort":null,"summary":null}` ||
		first.CompletedAt < first.CreatedAt {
		t.Fatalf("defaults: %s", first.RawJSON())
	}

	// The follow-up sets every create parameter; every field is checked.
	next, err := client.Responses.New(t.Context(), responses.ResponseNewParams{Model: "m",
		PreviousResponseID: openai.String(first.ID),
		Input:              responses.ResponseNewParamsInputUnion{OfString: openai.String("Again")},
		Instructions:       openai.String("be brief"), Metadata: shared.Metadata{"k": "v"}, Store: openai.Bool(true),
		Tools: []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "f",
			Parameters: map[string]any{"type": "object", "properties": map[string]any{}}, Strict: openai.Bool(false)}}},
		ToolChoice: responses.ResponseNewParamsToolChoiceUnion{OfAllowedTools: &responses.ToolChoiceAllowedParam{
			Mode: responses.ToolChoiceAllowedModeRequired, Tools: []map[string]any{{"type": "function", "name": "f"}}}},
		ParallelToolCalls: openai.Bool(false), MaxToolCalls: openai.Int(3),
		Temperature: openai.Float(0.25), TopP: openai.Float(0.5), MaxOutputTokens: openai.Int(100),
		TopLogprobs: openai.Int(3), User: openai.String("user-1"), PromptCacheKey: openai.String("pck"),
		PromptCacheRetention: responses.ResponseNewParamsPromptCacheRetentionInMemory,
		SafetyIdentifier:     openai.String("sid"), Truncation: responses.ResponseNewParamsTruncationAuto,
		ServiceTier: responses.ResponseNewParamsServiceTierFast, Background: openai.Bool(false),
		Reasoning: shared.ReasoningParam{Effort: shared.ReasoningEffortMax, Summary: shared.ReasoningSummaryConcise},
		Text: responses.ResponseTextConfigParam{Verbosity: responses.ResponseTextConfigVerbosityLow,
			Format: responses.ResponseFormatTextConfigUnionParam{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	raw = nil
	if err := json.Unmarshal([]byte(next.RawJSON()), &raw); err != nil {
		t.Fatal(err)
	}
	u := next.Usage
	checks := map[string]bool{
		"id":                     strings.HasPrefix(next.ID, "resp_") && next.ID != first.ID,
		"object":                 next.Object == "response",
		"created_at":             next.CreatedAt >= first.CreatedAt,
		"completed_at":           next.CompletedAt >= next.CreatedAt,
		"status":                 next.Status == responses.ResponseStatusCompleted,
		"background":             !next.Background && string(raw["background"]) == "false",
		"error":                  string(raw["error"]) == "null",
		"incomplete_details":     string(raw["incomplete_details"]) == "null",
		"instructions":           next.Instructions.OfString == "be brief",
		"metadata":               len(next.Metadata) == 1 && next.Metadata["k"] == "v",
		"model":                  next.Model == "m",
		"output":                 len(next.Output) == 1 && next.OutputText() == "Hello",
		"parallel_tool_calls":    !next.ParallelToolCalls && string(raw["parallel_tool_calls"]) == "false",
		"temperature":            next.Temperature == 0.25,
		"tool_choice":            next.ToolChoice.Type == "allowed_tools" && next.ToolChoice.Mode == "required" && len(next.ToolChoice.Tools) == 1,
		"tools":                  len(next.Tools) == 1 && next.Tools[0].Type == "function" && next.Tools[0].Name == "f",
		"top_p":                  next.TopP == 0.5,
		"max_output_tokens":      next.MaxOutputTokens == 100,
		"max_tool_calls":         next.MaxToolCalls == 3,
		"previous_response_id":   next.PreviousResponseID == first.ID,
		"reasoning":              next.Reasoning.Effort == shared.ReasoningEffortMax && next.Reasoning.Summary == shared.ReasoningSummaryConcise,
		"service_tier":           next.ServiceTier == responses.ResponseServiceTierPriority, // OpenAI serves "fast" as priority
		"text":                   next.Text.Verbosity == "low" && next.Text.Format.Type == "json_object",
		"top_logprobs":           next.TopLogprobs == 3,
		"truncation":             next.Truncation == responses.ResponseTruncationAuto,
		"usage":                  u.InputTokens == 10 && u.OutputTokens == 5 && u.TotalTokens == 15 && u.JSON.InputTokensDetails.Valid() && u.JSON.OutputTokensDetails.Valid(),
		"user":                   next.User == "user-1",
		"store":                  string(raw["store"]) == "true",
		"conversation":           string(raw["conversation"]) == "null",
		"prompt":                 string(raw["prompt"]) == "null",
		"prompt_cache_key":       next.PromptCacheKey == "pck",
		"prompt_cache_retention": next.PromptCacheRetention == responses.ResponsePromptCacheRetentionInMemory,
		"safety_identifier":      next.SafetyIdentifier == "sid",
	}
	for _, f := range responseFields {
		ok, checked := checks[f]
		switch {
		case !checked:
			t.Errorf("the follow-up's %q is not checked", f)
		case !ok:
			t.Errorf("the follow-up's %s: %s", f, raw[f])
		}
	}
	if t.Failed() {
		t.Fatalf("follow-up: %s", next.RawJSON())
	}
	// Errors carry OpenAI's type, which SDKs read.
	_, err = client.Responses.New(t.Context(), responses.ResponseNewParams{Model: "m", Temperature: openai.Float(5),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Hi")}})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Type != "invalid_request_error" || apiErr.Param != "temperature" {
		t.Fatalf("error: %v", err)
	}
	// The stored copy answers the same fields.
	got, err := client.Responses.Get(t.Context(), next.ID, responses.ResponseGetParams{})
	if err != nil || got.PreviousResponseID != first.ID || got.Temperature != 0.25 {
		t.Fatalf("stored: %v %s", err, got.RawJSON())
	}
}

// paramsBody is a create request with every answer-shaping parameter.
func paramsBody() map[string]any {
	return map[string]any{"model": "m", "input": "Hi", "temperature": 0.2, "top_p": 0.9, "max_output_tokens": 64,
		"top_logprobs": 2, "truncation": "auto", "user": "u1", "service_tier": "priority", "prompt_cache_key": "k",
		"prompt_cache_retention": "24h", "safety_identifier": "s", "background": false,
		"stream_options":     map[string]any{"include_obfuscation": false},
		"context_management": []any{map[string]any{"type": "compaction", "compact_threshold": 1000}},
		"reasoning":          map[string]any{"effort": "high", "summary": "auto"},
		"text": map[string]any{"verbosity": "high", "format": map[string]any{"type": "json_schema", "name": "out",
			"strict": true, "schema": map[string]any{"type": "object", "properties": map[string]any{}}}}}
}

// TestResponsesParamsReachUpstream: the create parameters are accepted and
// passed on in each upstream API's names (Chat Completions: max_tokens,
// response_format, reasoning_effort).
func TestResponsesParamsReachUpstream(t *testing.T) {
	t.Run("chat", func(t *testing.T) {
		e, up, key := newEchoEnv(t, respgw.APIChat)
		if r := e.do(key, "POST", "/v1/responses", paramsBody()); r.code != 200 {
			t.Fatalf("create: %s", r)
		}
		got := up.rawRequest(0)
		want := map[string]any{"temperature": 0.2, "top_p": 0.9, "max_tokens": 64.0, "reasoning_effort": "high",
			"verbosity": "high", "user": "u1", "service_tier": "priority", "prompt_cache_key": "k", "prompt_cache_retention": "24h",
			"safety_identifier": "s"}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("upstream %s = %v, want %v", k, got[k], v)
			}
		}
		rf, _ := json.Marshal(got["response_format"])
		if string(rf) != `{"json_schema":{"name":"out","schema":{"properties":{},"type":"object"},"strict":true},"type":"json_schema"}` {
			t.Errorf("response_format %s", rf)
		}
		for _, k := range []string{"truncation", "text", "reasoning", "max_output_tokens", "top_logprobs", "context_management"} {
			if _, ok := got[k]; ok {
				t.Errorf("a chat upstream got %q", k)
			}
		}
	})
	t.Run("responses", func(t *testing.T) {
		e, up, key := newEchoEnv(t, respgw.APIResponses)
		if r := e.do(key, "POST", "/v1/responses", paramsBody()); r.code != 200 {
			t.Fatalf("create: %s", r)
		}
		got := up.rawRequest(0)
		for k, v := range map[string]any{"temperature": 0.2, "top_p": 0.9, "max_output_tokens": 64.0, "top_logprobs": 2.0,
			"truncation": "auto", "user": "u1", "service_tier": "priority", "prompt_cache_retention": "24h"} {
			if got[k] != v {
				t.Errorf("upstream %s = %v, want %v", k, got[k], v)
			}
		}
		text, _ := json.Marshal(got["text"])
		reasoning, _ := json.Marshal(got["reasoning"])
		if !strings.Contains(string(text), `"name":"out"`) || string(reasoning) != `{"effort":"high","summary":"auto"}` {
			t.Errorf("text %s reasoning %s", text, reasoning)
		}
	})
}

// TestResponsesParamsRefused: values OpenAI refuses, fields OpenAI does
// not have, and state the gateway does not keep are 400s naming the field.
func TestResponsesParamsRefused(t *testing.T) {
	e, up, key := newEchoEnv(t, respgw.APIChat)
	for field, value := range map[string]any{
		"temperature":       3,
		"top_p":             -1,
		"max_output_tokens": 1,
		"truncation":        "sometimes",
		"service_tier":      "gold",
		"reasoning":         map[string]any{"effort": "extreme"},
		"text":              map[string]any{"format": map[string]any{"type": "xml"}},
		"conversation":      "conv_123",
		"prompt":            map[string]any{"id": "pmpt_1"},
		"frobnicate":        true,
	} {
		body := map[string]any{"model": "m", "input": "Hi", field: value}
		er := e.do(key, "POST", "/v1/responses", body).wantError(t, http.StatusBadRequest, "")
		if er.Error.Param == nil || !strings.HasPrefix(*er.Error.Param, field) {
			t.Errorf("%s: %+v", field, er.Error)
		}
	}
	if up.count() != 0 {
		t.Fatalf("the upstream was called %d times", up.count())
	}
}

// TestResponsesItemReference: item_reference items resolve to the output
// items of the organisation's stored responses (the AI SDK's multi-turn
// form with store on); unknown ids and other organisations' are 400s.
func TestResponsesItemReference(t *testing.T) {
	e, up, key := newEchoEnv(t, respgw.APIChat)
	var first responseObj
	e.do(key, "POST", "/v1/responses", map[string]any{"model": "m", "input": "Hi"}).json(t, &first)
	if len(first.Output) != 1 || first.Output[0].Type != "message" {
		t.Fatalf("first: %+v", first)
	}
	msgID := first.Output[0].ID
	r := e.do(key, "POST", "/v1/responses", map[string]any{"model": "m", "input": []any{
		map[string]any{"role": "user", "content": "Hi"},
		map[string]any{"type": "item_reference", "id": msgID},
		map[string]any{"role": "user", "content": "Again"}}})
	if r.code != 200 {
		t.Fatalf("with a reference: %s", r)
	}
	if got := roles(up.requests[1]); got != "user:Hi|assistant:Hello|user:Again" {
		t.Fatalf("upstream saw %s", got)
	}

	ref := func(id string) map[string]any {
		return map[string]any{"model": "m", "input": []any{map[string]any{"type": "item_reference", "id": id}}}
	}
	er := e.do(key, "POST", "/v1/responses", ref("msg_nope")).wantError(t, http.StatusBadRequest, "")
	if er.Error.Param == nil || *er.Error.Param != "input[0].id" {
		t.Fatalf("unknown id: %+v", er.Error)
	}
	_, other := e.newKey(e.newOrg("other", true), computerCaps)
	e.do(other, "POST", "/v1/responses", ref(msgID)).wantError(t, http.StatusBadRequest, "")
	e.do(key, "POST", "/v1/responses", map[string]any{"model": "m", "input": []any{
		map[string]any{"type": "item_reference", "id": msgID, "extra": 1}}}).wantError(t, http.StatusBadRequest, "")

	// A deleted response's items are gone with it.
	if d := e.do(key, "DELETE", "/v1/responses/"+first.ID, nil); d.code != 200 {
		t.Fatalf("delete: %s", d)
	}
	e.do(key, "POST", "/v1/responses", ref(msgID)).wantError(t, http.StatusBadRequest, "")
}

// TestAISDKMultiTurn: the AI SDK's default multi-turn flow (generateText,
// its response messages passed back; store on, so the earlier assistant
// turn goes as an item_reference) through the real npm packages, installed
// by `make test` (scripts/testdeps.sh).
func TestAISDKMultiTurn(t *testing.T) {
	e := newEnv(t, nil)
	up := newScripted(t, func(n int, req map[string]any) (int, any) {
		if roles(req) == "user:Hi|assistant:Hello|user:Again" {
			return 200, chatAnswer(map[string]any{"role": "assistant", "content": "Hello again"})
		}
		return 200, chatAnswer(map[string]any{"role": "assistant", "content": "Hello"})
	})
	e.withGatewayConfig(respgw.Config{UpstreamURL: up.srv.URL + "/v1", Model: "m"})
	_, key := e.newKey("", computerCaps)
	if _, err := os.Stat("testdata/aisdk/node_modules/ai"); err != nil {
		t.Fatalf("the AI SDK is not installed (make test installs it: bash scripts/testdeps.sh): %v", err)
	}
	cmd := exec.CommandContext(t.Context(), "node", "multiturn.mjs")
	cmd.Dir = "testdata/aisdk"
	cmd.Env = append(os.Environ(), "CUBICLE_URL="+e.url, "CUBICLE_KEY="+key)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	var got struct {
		First, Second string
		Sent          json.RawMessage
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got.First != "Hello" || got.Second != "Hello again" || !strings.Contains(string(got.Sent), `"type":"item_reference"`) {
		t.Fatalf("answers %q, %q; sent %s", got.First, got.Second, got.Sent)
	}
}
