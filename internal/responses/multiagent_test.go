package responses

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	oai "github.com/openai/openai-go/v3/responses"

	"github.com/cubicle-sandbox/cubicle/internal/responses/upstreamtest"
	"github.com/cubicle-sandbox/cubicle/internal/tools"
)

// The seed's sentences (embedded-code-interpreter.md, "HTTP multi-agent
// execution") that these tests assert.
const (
	seedShared      = "All agents share the ready executor and its guest limits."
	seedNoCapacity  = "Subagent slots do not create independent interpreter capacity budgets."
	seedAttributed  = "The client sees an attributed code_interpreter_call and, for SSE, its normal lifecycle with response-wide output indexes."
	seedNoClientRun = "Interpreter execution does not require a client continuation."
)

const multiBody = `{"input":"two jobs","stream":true,"multi_agent":{"enabled":true,"max_concurrent_subagents":2},` + toolsBody + `}`

// multiStep scripts a root that spawns alpha and beta in one answer; each
// subagent runs code once, then answers; the root then sums up.
func multiStep(n int, req map[string]any) (int, any) {
	code := func(src string) string { b, _ := json.Marshal(map[string]string{"code": src}); return string(b) }
	switch n {
	case 1:
		return 200, upstreamtest.ToolCallsAnswer("", upstreamtest.Call{ID: "s1", Name: SpawnAgentName, Args: `{"name":"alpha","task":"compute 2*3"}`},
			upstreamtest.Call{ID: "s2", Name: SpawnAgentName, Args: `{"name":"beta","task":"compute 4!"}`})
	case 2:
		return 200, upstreamtest.ToolCallsAnswer("", upstreamtest.Call{ID: "a1", Name: tools.CodeInterpreterName, Args: code("print(2*3)\n")})
	case 3:
		return 200, upstreamtest.TextAnswer("alpha: 6")
	case 4:
		return 200, upstreamtest.ToolCallsAnswer("", upstreamtest.Call{ID: "b1", Name: tools.CodeInterpreterName, Args: code("import math\nprint(math.factorial(4))\n")})
	case 5:
		return 200, upstreamtest.TextAnswer("beta: 24")
	}
	return 200, upstreamtest.TextAnswer("6 and 24")
}

// TestMultiAgentSharedExecutor: "Stored HTTP multi-agent requests use the
// same interpreter executor in each agent's tool registry." Two subagents
// run their code in the response's one computer (no computer of their
// own), the output is attributed and indexed response-wide, and the
// stream, parsed with openai-go, has the normal lifecycle.
func TestMultiAgentSharedExecutor(t *testing.T) {
	for _, u := range upstreams {
		t.Run(u.name, func(t *testing.T) {
			h := newHarness(t, u.api, multiStep, func(c *Config) { c.Upstreams[0].NoStream = u.noStream })
			resp, events, err := h.stream(context.Background(), multiBody)
			if err != nil {
				t.Fatal(err)
			}
			// seedShared, seedNoCapacity: one computer for the response,
			// every call in it.
			created, ran, _ := h.comp.snapshot()
			if len(created) != 1 {
				t.Fatalf("%s %s: %d computers made, want 1", seedShared, seedNoCapacity, len(created))
			}
			if len(ran) != 2 || !strings.HasPrefix(ran[0], "cmp_1 code_interpreter ") || !strings.HasPrefix(ran[1], "cmp_1 code_interpreter ") {
				t.Fatalf("ran %q, want both subagents' code in cmp_1", ran)
			}
			// seedNoClientRun: the subagents' code ran within the one request.
			if resp.Status != "completed" {
				t.Fatalf("%s: status %q", seedNoClientRun, resp.Status)
			}
			want := []string{"multi_agent_call /root", "code_interpreter_call /root/alpha", "message /root/alpha",
				"multi_agent_call_output /root", "multi_agent_call /root", "code_interpreter_call /root/beta",
				"message /root/beta", "multi_agent_call_output /root", "message /root"}
			var final oai.Response
			if err := json.Unmarshal(mustJSON(t, resp), &final); err != nil {
				t.Fatal(err)
			}
			if got := attributions(t, final.Output); !slices.Equal(got, want) {
				t.Fatalf("output\n%q\nwant\n%q", got, want)
			}
			if out := final.Output[3].RawJSON(); !strings.Contains(out, `"output":"alpha: 6"`) || !strings.Contains(out, `"call_id":"s1"`) {
				t.Fatalf("alpha's answer %s", out)
			}
			for _, i := range []int{1, 5} {
				if c := final.Output[i].AsCodeInterpreterCall(); c.ContainerID != "cmp_1" || c.Status != "completed" {
					t.Fatalf("item %d %+v", i, c)
				}
			}
			checkMultiStream(t, events, want)
			// The subagents got the gateway's tools, not spawn_agent; the
			// root got spawn_agent; the root saw each subagent's answer.
			if names := toolNames(h.up.Request(0)); !slices.Contains(names, SpawnAgentName) {
				t.Fatalf("root tools %q", names)
			}
			sub := h.up.Request(1)
			if names := toolNames(sub); slices.Contains(names, SpawnAgentName) || !slices.Contains(names, tools.CodeInterpreterName) {
				t.Fatalf("subagent tools %q", names)
			}
			if got := messages(sub); len(got) != 2 || !strings.Contains(got[0], `"alpha"`) || got[1] != "user:compute 2*3" {
				t.Fatalf("subagent messages %q", got)
			}
			if got := messages(h.up.Request(5)); !slices.Equal(got[len(got)-2:], []string{"tool:alpha: 6", "tool:beta: 24"}) {
				t.Fatalf("root's last round %q", got)
			}
			// The stored response keeps the attribution.
			stored, err := h.store.Get(context.Background(), "org_1", resp.ID)
			if err != nil {
				t.Fatal(err)
			}
			var kept oai.Response
			if err := json.Unmarshal(stored.Body, &kept); err != nil {
				t.Fatal(err)
			}
			if got := attributions(t, kept.Output); !slices.Equal(got, want) {
				t.Fatalf("stored output %q", got)
			}
		})
	}
}

// checkMultiStream parses the events with openai-go: contiguous sequence
// numbers; created, in_progress first and completed last, none of them
// attributed; items added at response-wide indexes 0, 1, 2, …, each done
// after it was added and before the next was added, with the item's
// agent on each event about it; each code_interpreter_call with its
// normal lifecycle.
func checkMultiStream(t *testing.T, events []Event, want []string) {
	t.Helper()
	var added, done []string
	open := -1
	var ci []string // the lifecycle of code_interpreter_call events
	for i, ev := range events {
		raw := mustJSON(t, ev)
		var u oai.ResponseStreamEventUnion
		if err := json.Unmarshal(raw, &u); err != nil {
			t.Fatal(err)
		}
		if u.SequenceNumber != int64(i) {
			t.Fatalf("event %d has sequence_number %d", i, u.SequenceNumber)
		}
		var agent struct {
			Agent *struct {
				Name string `json:"agent_name"`
			} `json:"agent"`
		}
		json.Unmarshal(raw, &agent)
		switch {
		case i == 0 && u.Type != "response.created", i == 1 && u.Type != "response.in_progress",
			i == len(events)-1 && u.Type != "response.completed":
			t.Fatalf("event %d is %s", i, u.Type)
		case strings.HasPrefix(u.Type, "response.") && strings.Count(u.Type, ".") == 1 && agent.Agent != nil:
			t.Fatalf("lifecycle event %s is attributed", u.Type)
		}
		switch u.Type {
		case "response.output_item.added":
			a := u.AsResponseOutputItemAdded()
			if int(a.OutputIndex) != len(added) || open != -1 {
				t.Fatalf("%s: added at %d (open %d) after %d items", seedAttributed, a.OutputIndex, open, len(added))
			}
			open = int(a.OutputIndex)
			added = append(added, attributions(t, []oai.ResponseOutputItemUnion{a.Item})...)
		case "response.output_item.done":
			d := u.AsResponseOutputItemDone()
			if int(d.OutputIndex) != open {
				t.Fatalf("done at %d, open %d", d.OutputIndex, open)
			}
			open = -1
			done = append(done, attributions(t, []oai.ResponseOutputItemUnion{d.Item})...)
		}
		if strings.Contains(u.Type, "code_interpreter_call") || strings.HasPrefix(u.Type, "response.output_item.") && strings.Contains(string(raw), `"code_interpreter_call"`) {
			ci = append(ci, u.Type)
		}
		if strings.HasPrefix(u.Type, "response.output_") && strings.Count(u.Type, ".") > 1 || strings.HasPrefix(u.Type, "response.code_interpreter") || strings.HasPrefix(u.Type, "response.content_part") {
			idx := int(u.OutputIndex)
			if agent.Agent == nil || agent.Agent.Name != strings.Fields(want[idx])[1] {
				t.Fatalf("event %s at %d attributed %+v, want %s", u.Type, idx, agent.Agent, want[idx])
			}
		}
	}
	if !slices.Equal(added, want) || !slices.Equal(done, want) {
		t.Fatalf("added %q\ndone %q\nwant %q", added, done, want)
	}
	lifecycle := []string{"response.output_item.added", "response.code_interpreter_call.in_progress",
		"response.code_interpreter_call_code.delta", "response.code_interpreter_call_code.done",
		"response.code_interpreter_call.interpreting", "response.code_interpreter_call.completed", "response.output_item.done"}
	if got := squash(ci); !slices.Equal(got, append(slices.Clone(lifecycle), lifecycle...)) {
		t.Fatalf("%s\ncode_interpreter events %q", seedAttributed, got)
	}
}

// attributions are "type agent" of items, the agent read from each
// item's JSON.
func attributions(t *testing.T, items []oai.ResponseOutputItemUnion) []string {
	t.Helper()
	var out []string
	for _, it := range items {
		var a struct {
			Type  string `json:"type"`
			Agent struct {
				Name string `json:"agent_name"`
			} `json:"agent"`
		}
		if err := json.Unmarshal([]byte(it.RawJSON()), &a); err != nil {
			t.Fatal(err)
		}
		out = append(out, a.Type+" "+a.Agent.Name)
	}
	return out
}

// toolNames are the function names a Chat Completions request offered.
func toolNames(req map[string]any) []string {
	var out []string
	ts, _ := req["tools"].([]any)
	for _, tl := range ts {
		out = append(out, tl.(map[string]any)["function"].(map[string]any)["name"].(string))
	}
	return out
}

// TestMultiAgentLimits: subagents do not nest (a subagent's spawn_agent
// runs nothing), a name runs once, arguments the model got wrong run
// nothing, and the agents share the response's rounds.
func TestMultiAgentLimits(t *testing.T) {
	h := newHarness(t, APIChat, func(n int, req map[string]any) (int, any) {
		switch n {
		case 1:
			return 200, upstreamtest.ToolCallsAnswer("", upstreamtest.Call{ID: "s1", Name: SpawnAgentName, Args: `{"name":"alpha","task":"t"}`},
				upstreamtest.Call{ID: "s2", Name: SpawnAgentName, Args: `{"name":"alpha","task":"again"}`},
				upstreamtest.Call{ID: "s3", Name: SpawnAgentName, Args: `{"name":"Bad Name","task":"t"}`})
		case 2:
			return 200, upstreamtest.ToolCallsAnswer("", upstreamtest.Call{ID: "n1", Name: SpawnAgentName, Args: `{"name":"nested","task":"t"}`})
		case 3:
			return 200, upstreamtest.TextAnswer("alpha done")
		}
		return 200, upstreamtest.TextAnswer("end")
	}, nil)
	resp, err := h.create(strings.Replace(multiBody, `"stream":true,`, "", 1))
	if err != nil {
		t.Fatal(err)
	}
	if got := messages(h.up.Request(2)); got[len(got)-1] != "tool:"+SpawnAgentName+" is not a tool of this agent." {
		t.Fatalf("nested spawn answered %q", got)
	}
	got := messages(h.up.Request(3))
	if !strings.HasPrefix(got[len(got)-2], `tool:A subagent named "alpha" already ran`) || !strings.HasPrefix(got[len(got)-1], "tool:spawn_agent needs") {
		t.Fatalf("root's tool outputs %q", got)
	}
	if h.up.Calls() != 4 || len(resp.Output) != 8 { // 3 calls + 3 outputs + alpha's message + the root's
		t.Fatalf("%d upstream calls, %d items", h.up.Calls(), len(resp.Output))
	}

	// The rounds are the response's: a subagent that uses them up ends it.
	h = newHarness(t, APIChat, func(n int, req map[string]any) (int, any) {
		if n == 1 {
			return 200, upstreamtest.ToolCallsAnswer("", upstreamtest.Call{ID: "s1", Name: SpawnAgentName, Args: `{"name":"loop","task":"t"}`})
		}
		return 200, upstreamtest.ToolCallsAnswer("", upstreamtest.Call{ID: "c", Name: "builtin__computer_exec", Args: `{"command":"true"}`})
	}, func(c *Config) { c.MaxRounds = 4 })
	resp, err = h.create(strings.Replace(multiBody, `"stream":true,`, "", 1))
	if err != nil {
		t.Fatal(err)
	}
	if h.up.Calls() != 4 || resp.Status != "incomplete" || resp.IncompleteDetails.Reason != "max_rounds" {
		t.Fatalf("%d calls, status %s %+v", h.up.Calls(), resp.Status, resp.IncompleteDetails)
	}
	if created, _, _ := h.comp.snapshot(); len(created) != 1 {
		t.Fatalf("%d computers", len(created))
	}
}

// TestMultiAgentRequestErrors: what a multi-agent request may not be is a
// 400 naming the parameter, before any upstream call.
func TestMultiAgentRequestErrors(t *testing.T) {
	h := newHarness(t, APIChat, multiStep, nil)
	for body, param := range map[string]string{
		`{"input":"x","store":false,"multi_agent":{"enabled":true}}`:                 "store",
		`{"input":"x","max_tool_calls":3,"multi_agent":{"enabled":true}}`:            "max_tool_calls",
		`{"input":"x","multi_agent":{"enabled":true,"max_concurrent_subagents":0}}`:  "multi_agent.max_concurrent_subagents",
		`{"input":"x","multi_agent":{"enabled":true,"max_concurrent_subagents":17}}`: "multi_agent.max_concurrent_subagents",
		`{"input":"x","multi_agent":{"enabled":true,"agents":[]}}`:                   "multi_agent.agents",
		`{"input":"x","multi_agent":{"enabled":"yes"}}`:                              "multi_agent.enabled",
		`{"input":"x","multi_agent":[]}`:                                             "multi_agent",
	} {
		_, err := h.g.Begin(context.Background(), h.p, h.request(body))
		var ge *Error
		if !errors.As(err, &ge) || ge.Param != param {
			t.Errorf("%s: %v, want a 400 on %s", body, err, param)
		}
	}
	if h.up.Calls() != 0 {
		t.Fatalf("%d upstream calls", h.up.Calls())
	}
	// Not enabled: an ordinary response, nothing attributed.
	resp, err := h.create(`{"input":"x","multi_agent":{"enabled":false}}`)
	if err != nil {
		t.Fatal(err)
	}
	if b := mustJSON(t, resp); strings.Contains(string(b), `"agent"`) || strings.Contains(string(b), `"multi_agent"`) {
		t.Fatalf("plain response %s", b)
	}
}
