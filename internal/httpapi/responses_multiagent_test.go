package httpapi_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
)

// multiAgentStep: the root spawns alpha and beta; alpha writes a file in
// the computer and prints 55, beta reads the file and prints 120; each
// answers with its tool output; the root sums up.
func multiAgentStep(n int, req map[string]any) (int, any) {
	msgs, _ := req["messages"].([]any)
	first, _ := msgs[0].(map[string]any)
	system, _ := first["content"].(string)
	tools := toolMessages(req)
	call := func(id, name string, args any) map[string]any {
		b, _ := json.Marshal(args)
		return map[string]any{"id": id, "type": "function", "function": map[string]any{"name": name, "arguments": string(b)}}
	}
	switch {
	case first["role"] == "system" && strings.Contains(system, "subagent") && len(tools) == 0:
		code := "open('shared.txt', 'w').write('from alpha')\nprint(sum(range(1, 11)))"
		if strings.Contains(system, `"beta"`) {
			code = "import math\nprint(open('shared.txt').read(), math.factorial(5))"
		}
		return 200, chatAnswer(map[string]any{"role": "assistant", "content": nil,
			"tool_calls": []any{call("call_code", "code_interpreter", map[string]string{"code": code})}})
	case first["role"] == "system" && strings.Contains(system, "subagent"):
		return 200, chatAnswer(map[string]any{"role": "assistant", "content": "got " + strings.TrimSpace(tools[0])})
	case len(tools) == 0:
		return 200, chatAnswer(map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{
			call("call_s1", "spawn_agent", map[string]string{"name": "alpha", "task": "sum 1..10"}),
			call("call_s2", "spawn_agent", map[string]string{"name": "beta", "task": "5!"})}})
	}
	return 200, chatAnswer(map[string]any{"role": "assistant", "content": strings.Join(tools, "; ")})
}

// TestOpenAIClientMultiAgent: a stored multi-agent response streamed to
// openai-go, with real computers on a server that runs one computer at
// a time: "All agents share the ready executor and its guest limits.
// Subagent slots do not create independent interpreter capacity
// budgets." Both subagents' code runs in the response's one computer
// (beta reads the file alpha wrote); the client sees attributed
// code_interpreter_call items with response-wide output indexes and the
// normal lifecycle.
func TestOpenAIClientMultiAgent(t *testing.T) {
	e := newEnv(t, func(c *computer.Config) { c.MaxConcurrent = 1; c.PoolSize = 0 })
	e.withGateway(newScripted(t, multiAgentStep))
	_, key := e.newKey("", computerCaps)
	client := e.sdk(key)
	stream := client.Responses.NewStreaming(t.Context(), responses.ResponseNewParams{
		Model:   "m",
		Input:   responses.ResponseNewParamsInputUnion{OfString: openai.String("two jobs")},
		Tools:   sdkTools,
		Include: []responses.ResponseIncludable{responses.ResponseIncludableCodeInterpreterCallOutputs},
	}, option.WithJSONSet("multi_agent", map[string]any{"enabled": true, "max_concurrent_subagents": 2}))
	defer stream.Close()
	var added []string
	var completed responses.Response
	for n := 0; stream.Next(); n++ {
		ev := stream.Current()
		if ev.SequenceNumber != int64(n) {
			t.Fatalf("event %d: %s", n, ev.RawJSON())
		}
		switch v := ev.AsAny().(type) {
		case responses.ResponseOutputItemAddedEvent:
			if int(v.OutputIndex) != len(added) {
				t.Fatalf("added at %d after %d items", v.OutputIndex, len(added))
			}
			added = append(added, v.Item.Type+" "+agentOf(t, v.Item.RawJSON()))
		case responses.ResponseCodeInterpreterCallInterpretingEvent:
			if a := agentOf(t, ev.RawJSON()); a != "/root/alpha" && a != "/root/beta" {
				t.Fatalf("interpreting event attributed %q: %s", a, ev.RawJSON())
			}
		case responses.ResponseCompletedEvent:
			if agentOf(t, ev.RawJSON()) != "" {
				t.Fatalf("lifecycle event attributed: %s", ev.RawJSON())
			}
			completed = v.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	want := "multi_agent_call /root,code_interpreter_call /root/alpha,message /root/alpha,multi_agent_call_output /root," +
		"multi_agent_call /root,code_interpreter_call /root/beta,message /root/beta,multi_agent_call_output /root,message /root"
	if got := strings.Join(added, ","); got != want {
		t.Fatalf("items\n%s\nwant\n%s", got, want)
	}
	alpha, beta := completed.Output[1].AsCodeInterpreterCall(), completed.Output[5].AsCodeInterpreterCall()
	if alpha.ContainerID == "" || beta.ContainerID != alpha.ContainerID || len(beta.Outputs) != 1 ||
		!strings.HasPrefix(beta.Outputs[0].AsLogs().Logs, "from alpha 120") {
		t.Fatalf("alpha %s\nbeta %s", completed.Output[1].RawJSON(), completed.Output[5].RawJSON())
	}
	// The root's answer is the last message (OutputText joins every
	// agent's messages).
	if text := completed.Output[8].AsMessage().Content[0].Text; text != "got 55; got from alpha 120" {
		t.Fatalf("answer %q", text)
	}
	// One computer for the response, none per subagent.
	var list struct {
		Data []struct{ ID string } `json:"data"`
	}
	e.do(key, "GET", fmt.Sprintf("/v1/computers?status=all&response_id=%s", completed.ID), nil).json(t, &list)
	if len(list.Data) != 1 || list.Data[0].ID != alpha.ContainerID {
		t.Fatalf("computers of the response %+v", list.Data)
	}
	// The stored response keeps the attribution.
	got, err := client.Responses.Get(t.Context(), completed.ID, responses.ResponseGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	if a := agentOf(t, got.Output[5].RawJSON()); a != "/root/beta" {
		t.Fatalf("stored item attributed %q", a)
	}
}

// agentOf is the agent_name of an item's or event's JSON ("": none).
func agentOf(t *testing.T, raw string) string {
	t.Helper()
	var v struct {
		Agent struct {
			Name string `json:"agent_name"`
		} `json:"agent"`
	}
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		t.Fatal(err)
	}
	return v.Agent.Name
}
