package responses

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"

	"github.com/cubicle-sandbox/cubicle/internal/tools"
)

// Multi-agent responses (multi_agent: {"enabled": true}), after
// EmbeddedLLM/agentic-api's HTTP multi-agent execution: the root agent is
// offered one more tool, spawn_agent, and each call runs a subagent with
// the run loop of the response itself. Every agent shares the response's
// one computer (the executor), its limits and its round budget; a
// subagent gets no capacity of its own. Output items carry "agent":
// {"agent_name": "/root"} or "/root/<name>", and so do the events about
// them; the response's lifecycle events do not.

// SpawnAgentName is the tool the root agent of a multi-agent response
// calls to run a subagent.
const SpawnAgentName = "spawn_agent"

// RootAgent is the attribution of the root agent's items.
const RootAgent = "/root"

const (
	// defaultConcurrentSubagents is max_concurrent_subagents' default.
	defaultConcurrentSubagents = 3
	// maxConcurrentSubagents bounds max_concurrent_subagents.
	maxConcurrentSubagents = 16
	// MaxSubagents is how many subagents one response may run.
	MaxSubagents = 16
)

// MultiAgent is the request's and the response's multi_agent object.
type MultiAgent struct {
	Enabled                bool `json:"enabled"`
	MaxConcurrentSubagents int  `json:"max_concurrent_subagents"`
}

// MultiAgentCall is a multi_agent_call output item: the root agent asked
// for a subagent.
type MultiAgentCall struct {
	Type      string    `json:"type"`
	ID        string    `json:"id"`
	CallID    string    `json:"call_id"`
	Action    string    `json:"action"`
	Arguments string    `json:"arguments"`
	Status    string    `json:"status"`
	Agent     *AgentRef `json:"agent,omitempty"`
}

// MultiAgentCallOutput is a multi_agent_call_output output item: what
// the subagent answered (what the root agent sees).
type MultiAgentCallOutput struct {
	Type   string    `json:"type"`
	ID     string    `json:"id"`
	CallID string    `json:"call_id"`
	Action string    `json:"action"`
	Output string    `json:"output"`
	Status string    `json:"status"`
	Agent  *AgentRef `json:"agent,omitempty"`
}

// agentView is what one agent of a response is: its name (the
// attribution of its items; "" outside multi-agent responses), the tools
// offered to it and its tool_choice.
type agentView struct {
	name   string
	tools  []chatTool
	choice json.RawMessage
}

// parseMultiAgent checks the request's multi_agent (nil: absent or not
// enabled). A multi-agent response must be stored and takes no
// max_tool_calls (its agents share the computer's limits instead).
func parseMultiAgent(req *Request, stored bool) (*MultiAgent, error) {
	if len(req.MultiAgent) == 0 || string(req.MultiAgent) == "null" {
		return nil, nil
	}
	var in struct {
		Enabled                *bool `json:"enabled"`
		MaxConcurrentSubagents *int  `json:"max_concurrent_subagents"`
	}
	if err := strict(req.MultiAgent, &in, "multi_agent"); err != nil {
		return nil, err
	}
	if in.Enabled == nil || !*in.Enabled {
		return nil, nil
	}
	ma := &MultiAgent{Enabled: true, MaxConcurrentSubagents: defaultConcurrentSubagents}
	if n := in.MaxConcurrentSubagents; n != nil {
		if *n < 1 || *n > maxConcurrentSubagents {
			return nil, invalid("multi_agent.max_concurrent_subagents",
				"multi_agent.max_concurrent_subagents must be from 1 to %d", maxConcurrentSubagents)
		}
		ma.MaxConcurrentSubagents = *n
	}
	switch {
	case req.MaxToolCalls != nil:
		return nil, invalid("max_tool_calls", "max_tool_calls is not supported with multi_agent: the agents share the computer's limits")
	case req.Store != nil && !*req.Store:
		return nil, invalid("store", "multi_agent requires store=true")
	case !stored:
		return nil, invalid("multi_agent", "multi_agent needs stored responses, which this deployment does not keep")
	}
	return ma, nil
}

// spawnTool is the spawn_agent tool offered to the root agent.
var spawnTool = chatTool{Type: "function", Function: chatFunction{Name: SpawnAgentName,
	Description: "Run a subagent on a self-contained task and get its answer. The subagent has the same " +
		"code tools as you and works in the same computer (files you write, it sees). It cannot ask you " +
		"questions. Call it several times for independent tasks.",
	Parameters: json.RawMessage(`{"type":"object","properties":{` +
		`"name":{"type":"string","description":"A short name for the subagent: lowercase letters, digits, - or _ (at most 32)."},` +
		`"task":{"type":"string","description":"The task, with everything the subagent needs to know."}},` +
		`"required":["name","task"],"additionalProperties":false}`)}}

// rootView is the root agent of a multi-agent response: the request's
// tools and spawn_agent.
func rootView(pl *plan) agentView {
	return agentView{name: RootAgent, tools: append(slices.Clip(pl.tools), spawnTool), choice: pl.toolChoice}
}

// subagentView is a subagent: the request's gateway tools only (no
// client function, no spawn_agent: subagents do not nest).
func (r *Run) subagentView(name string) agentView {
	v := agentView{name: RootAgent + "/" + name}
	for _, t := range r.plan.tools {
		if r.plan.isGateway(t.Function.Name) {
			v.tools = append(v.tools, t)
		}
	}
	return v
}

// isGateway reports whether name is a gateway tool the request offered
// (the code interpreter, a builtin tool, a datastore tool, a script).
func (p *plan) isGateway(name string) bool {
	return (name == tools.CodeInterpreterName && p.codeInterpreter) || p.gatewayTools[name] || p.isDataTool(name) ||
		p.scriptTools[name]
}

// inSubagent reports whether the run is in a subagent's rounds.
func (r *Run) inSubagent() bool { return r.plan.multi != nil && r.view.name != RootAgent }

var agentName = regexp.MustCompile(`^[a-z0-9_-]{1,32}$`)

// subagentSystem is the system message a subagent starts with.
const subagentSystem = "You are the subagent %q of a multi-agent response. Do the task you are given on your own " +
	"and answer with its result. You share one computer with the other agents."

// spawn runs the root agent's spawn_agent call tc: a multi_agent_call
// item, the subagent's own rounds (its items attributed to it), then a
// multi_agent_call_output item with its answer, which the root sees.
// Arguments the model got wrong, or a response past MaxSubagents, run
// nothing: the model is told why.
func (r *Run) spawn(ctx context.Context, tc chatToolCall) (string, error) {
	call := MultiAgentCall{Type: "multi_agent_call", ID: newID("mac_"), CallID: tc.ID, Action: SpawnAgentName,
		Arguments: tc.Function.Arguments, Status: "completed", Agent: r.agentRef()}
	r.addItem(call)
	var a struct{ Name, Task string }
	var out string
	switch {
	case json.Unmarshal([]byte(tc.Function.Arguments), &a) != nil || !agentName.MatchString(a.Name) || a.Task == "":
		out = "spawn_agent needs {\"name\": <lowercase letters, digits, - or _, at most 32>, \"task\": <text>}."
	case slices.Contains(r.spawned, a.Name):
		out = fmt.Sprintf("A subagent named %q already ran in this response; choose another name.", a.Name)
	case len(r.spawned) >= MaxSubagents:
		out = fmt.Sprintf("This response already ran %d subagents, its limit.", MaxSubagents)
	default:
		r.spawned = append(r.spawned, a.Name)
		var err error
		if out, err = r.runSubagent(ctx, a.Name, a.Task); err != nil {
			return "", err
		}
	}
	r.addItem(MultiAgentCallOutput{Type: "multi_agent_call_output", ID: newID("maco_"), CallID: tc.ID,
		Action: SpawnAgentName, Output: out, Status: "completed", Agent: r.agentRef()})
	return out, nil
}

// addItem adds a finished item of the current agent: added, then done.
func (r *Run) addItem(item any) {
	idx := len(r.resp.Output)
	r.resp.Output = append(r.resp.Output, item)
	r.emit("response.output_item.added", map[string]any{"output_index": idx, "item": item})
	r.emit("response.output_item.done", map[string]any{"output_index": idx, "item": item})
}

// runSubagent runs the rounds of subagent name on task with the run loop
// (same computer, same round budget) and returns its answer. On an error
// the run stays the subagent's: the failure closes its items.
func (r *Run) runSubagent(ctx context.Context, name, task string) (string, error) {
	root, rootTurn := r.view, r.turn
	r.view = r.subagentView(name)
	msgs := []chatMessage{{Role: "system", Content: ptr(fmt.Sprintf(subagentSystem, name))}, {Role: "user", Content: ptr(task)}}
	msgs, err := r.converse(ctx, msgs)
	if err != nil {
		return "", err
	}
	r.view, r.turn = root, rootTurn
	if r.resp.Status == "incomplete" {
		return "The subagent stopped before answering: the response reached its limit of rounds.", nil
	}
	if last := msgs[len(msgs)-1]; last.Role == "assistant" && last.Content != nil && len(last.ToolCalls) == 0 {
		return *last.Content, nil
	}
	return "The subagent ended without an answer.", nil
}

// AgentRef is an output item's agent (its "agent" field).
type AgentRef struct {
	Name string `json:"agent_name"`
}

// agentRef is the current agent, for the items it adds (nil outside
// multi-agent responses).
func (r *Run) agentRef() *AgentRef {
	if r.plan.multi == nil {
		return nil
	}
	return &AgentRef{Name: r.view.name}
}

// attribute adds the agent of output item output_index to an event
// about it.
func (r *Run) attribute(fields map[string]any) {
	idx, ok := fields["output_index"].(int)
	if !ok || idx >= len(r.resp.Output) {
		return
	}
	if it, ok := r.resp.Output[idx].(interface{ agentOf() *AgentRef }); ok && it.agentOf() != nil {
		fields["agent"] = it.agentOf()
	}
}

func (c MultiAgentCall) agentOf() *AgentRef       { return c.Agent }
func (c MultiAgentCallOutput) agentOf() *AgentRef { return c.Agent }
