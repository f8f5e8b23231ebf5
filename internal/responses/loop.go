package responses

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/cubicle-sandbox/cubicle/internal/tools"
)

// loop runs the rounds with the upstream until an answer without gateway
// calls, a limit, or an error; r.msgs is then the conversation.
func (r *Run) loop(ctx context.Context) error {
	var err error
	r.msgs, err = r.converse(ctx, r.plan.messages)
	return err
}

// converse runs the current agent's rounds from msgs; every agent of a
// response shares MaxRounds. It returns the conversation as it got.
func (r *Run) converse(ctx context.Context, msgs []chatMessage) ([]chatMessage, error) {
	for r.rounds < r.g.cfg.MaxRounds {
		r.rounds++
		// Past max_tool_calls the model may answer, not call.
		limited := r.plan.maxToolCalls > 0 && r.toolCalls >= r.plan.maxToolCalls
		tu, err := r.ask(ctx, msgs, limited)
		if err != nil {
			return msgs, err
		}
		var done bool
		msgs, done, err = r.answered(ctx, msgs, tu, limited)
		if err != nil || done {
			return msgs, err
		}
	}
	r.resp.Status = "incomplete"
	r.resp.IncompleteDetails = &Incomplete{Reason: "max_rounds"}
	return msgs, nil
}

// ask sends the conversation to the upstream and turns its answer, as it
// arrives, into output items (r.turn); the usage adds up in the response.
func (r *Run) ask(ctx context.Context, msgs []chatMessage, limited bool) (*turn, error) {
	creq := chatRequest{Model: r.plan.model, Messages: msgs, Tools: r.view.tools, ToolChoice: r.view.choice, Params: r.plan.params}
	if len(creq.Tools) > 0 {
		creq.ParallelToolCalls = r.plan.parallel
		if limited {
			creq.ToolChoice = json.RawMessage(`"none"`)
		}
	}
	to := newTurnOutput(ctx, r, !limited)
	r.turn = to
	created := r.timing.Create
	stop := timed(&r.timing.Upstream)
	tu, err := r.up.complete(ctx, creq, to)
	stop()
	// A computer made while the answer streamed is not upstream time.
	r.timing.Upstream -= r.timing.Create - created
	if err == nil {
		err = to.err
	}
	if err != nil {
		return nil, err
	}
	to.finish(tu)
	r.resp.Usage.InputTokens += tu.usage.InputTokens
	r.resp.Usage.OutputTokens += tu.usage.OutputTokens
	r.resp.Usage.TotalTokens += tu.usage.TotalTokens
	return tu, nil
}

// answered adds the answer tu to the conversation, running its gateway
// calls; done: the response ended with it (its status is set).
func (r *Run) answered(ctx context.Context, msgs []chatMessage, tu *turn, limited bool) (_ []chatMessage, done bool, _ error) {
	switch {
	case len(tu.calls) == 0:
		if tu.text != "" {
			msgs = append(msgs, chatMessage{Role: "assistant", Content: ptr(tu.text)})
		}
		r.resp.Status = "completed"
		return msgs, true, nil
	case limited:
		// Gateway calls past the limit are ignored (not run, not
		// shown); the client's calls are output items, so the kept
		// conversation has them too: a continuation's
		// function_call_output then follows its call.
		if turn := r.clientTurn(tu); turn != nil {
			msgs = append(msgs, *turn)
		}
		r.resp.Status = "incomplete"
		r.resp.IncompleteDetails = &Incomplete{Reason: "max_tool_calls"}
		return msgs, true, nil
	}
	return r.runCalls(ctx, msgs, tu)
}

// runCalls adds the assistant turn with its calls, then runs each gateway
// call in model order and adds its output; client calls are already
// output items, and end the response (their outputs come in a later
// request). The system note of copied input files follows the outputs.
func (r *Run) runCalls(ctx context.Context, msgs []chatMessage, tu *turn) (_ []chatMessage, done bool, _ error) {
	assistant := chatMessage{Role: "assistant", ToolCalls: tu.calls}
	if tu.text != "" {
		assistant.Content = ptr(tu.text)
	}
	at := len(msgs) // where the assistant turn starts
	msgs = append(msgs, assistant)
	clientCalls := false
	to := r.turn // a subagent's rounds (spawn) have turns of their own
	for i, tc := range tu.calls {
		var out string
		var err error
		switch name := tc.Function.Name; {
		case !r.isGatewayCall(name):
			clientCalls = true
			continue
		case r.plan.maxToolCalls > 0 && r.toolCalls >= r.plan.maxToolCalls:
			out = r.skipCall(to.code(i))
		case r.inSubagent() && !r.plan.isGateway(name):
			out = fmt.Sprintf("%s is not a tool of this agent.", name)
		case name == SpawnAgentName && r.plan.multi != nil:
			out, err = r.spawn(ctx, tc)
		case name == tools.CodeInterpreterName:
			out, err = r.codeInterpreter(ctx, tc, to.code(i))
		default:
			out, err = r.gatewayTool(ctx, tc)
		}
		if err != nil {
			return msgs, false, err
		}
		msgs = append(msgs, chatMessage{Role: "tool", ToolCallID: tc.ID, Content: ptr(out)})
	}
	if r.note != "" {
		note := chatMessage{Role: "system", Content: ptr(r.note)}
		if clientCalls {
			// The client's outputs come in a later request, right
			// after the calls: the note goes before the turn.
			msgs = slices.Insert(msgs, at, note)
		} else {
			msgs = append(msgs, note)
		}
		r.note = ""
	}
	if clientCalls {
		r.resp.Status = "completed"
	}
	return msgs, clientCalls, nil
}

// NotRunOutput is what the model sees for a gateway call past the
// request's max_tool_calls, made in the same answer as the calls before it.
const NotRunOutput = "This call was not run: the response reached its max_tool_calls limit."

// skipCall ignores a gateway call past max_tool_calls: it does not run; a
// code_interpreter_call item already shown while its code streamed ends
// incomplete. It returns what the model sees.
func (r *Run) skipCall(streamed *openCode) string {
	if streamed != nil { // a code_interpreter call
		item := r.resp.Output[streamed.idx].(CodeInterpreterCall)
		item.Status = "incomplete"
		r.resp.Output[streamed.idx] = item
		r.emit("response.output_item.done", map[string]any{"output_index": streamed.idx, "item": item})
	}
	return NotRunOutput
}

// clientTurn is the assistant turn of tu as the client saw it: its text
// and its client function calls, without the gateway's (nil: neither).
func (r *Run) clientTurn(tu *turn) *chatMessage {
	m := chatMessage{Role: "assistant"}
	for _, tc := range tu.calls {
		if !r.isGatewayCall(tc.Function.Name) {
			m.ToolCalls = append(m.ToolCalls, tc)
		}
	}
	if tu.text != "" {
		m.Content = ptr(tu.text)
	}
	if m.Content == nil && len(m.ToolCalls) == 0 {
		return nil
	}
	return &m
}
