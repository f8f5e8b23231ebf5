package responses

import (
	"context"
	"errors"
	"strings"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/tools"
)

// turnOutput turns one upstream answer, as it arrives, into output items
// and their events: text becomes a message item (added at the first
// fragment, one output_text.delta per fragment), a client function call
// becomes a function_call item (added when its name is known, one
// function_call_arguments.delta per fragment), and a code_interpreter
// call (with streamCode) becomes a code_interpreter_call item whose code
// streams as code_interpreter_call_code.delta events; its computer is
// made then, while the model still writes. The loop runs the gateway's
// calls after the answer, in model order; other gateway tools are shown
// only then. Each item takes its output_index when it is added.
type turnOutput struct {
	r          *Run
	ctx        context.Context
	streamCode bool
	err        error // making the computer failed; the loop returns it
	finished   bool  // finish ran: the answer's items are complete
	msg        *openMessage
	calls      map[int]*openCall // by the call's index in the answer
}

type openMessage struct {
	idx  int
	item Message
	text strings.Builder
}

type openCall struct {
	args   strings.Builder // fragments before the name was known
	client *openFunctionCall
	code   *openCode
	named  bool
}

// openCode is a code_interpreter_call item whose code is streaming.
type openCode struct {
	idx  int
	item CodeInterpreterCall
	dec  codeStream
	sent strings.Builder // the code sent in deltas
	// denied: the policy refused the response's computer when the call
	// opened; it does not run and the model is told DeniedByPolicySentence.
	denied bool
}

type openFunctionCall struct {
	idx  int
	item FunctionCall
	args strings.Builder
}

func newTurnOutput(ctx context.Context, r *Run, streamCode bool) *turnOutput {
	return &turnOutput{r: r, ctx: ctx, streamCode: streamCode, calls: map[int]*openCall{}}
}

// isGatewayCall reports whether name is one of the gateway's tools the
// request offered (run by the gateway, never shown as a function_call).
func (r *Run) isGatewayCall(name string) bool {
	switch {
	case r.inSubagent():
		return true // a subagent has no client tools (runCalls)
	case name == SpawnAgentName && r.plan.multi != nil:
		return true
	}
	return r.plan.isGateway(name)
}

func (t *turnOutput) text(delta string) {
	r := t.r
	if t.msg == nil {
		t.msg = &openMessage{idx: len(r.resp.Output), item: Message{Type: "message", ID: newID("msg_"),
			Role: "assistant", Status: "in_progress", Content: []OutputText{}, Agent: r.agentRef()}}
		r.resp.Output = append(r.resp.Output, t.msg.item)
		r.emit("response.output_item.added", map[string]any{"output_index": t.msg.idx, "item": t.msg.item})
		r.emit("response.content_part.added", t.msg.at("part", OutputText{Type: "output_text", Text: "", Annotations: []any{}}))
	}
	t.msg.text.WriteString(delta)
	d := t.msg.at("delta", delta)
	d["logprobs"] = []any{}
	r.emit("response.output_text.delta", d)
}

// at is the fields locating an event in the message, plus k: v.
func (m *openMessage) at(k string, v any) map[string]any {
	return map[string]any{"item_id": m.item.ID, "output_index": m.idx, "content_index": 0, k: v}
}

func (t *turnOutput) call(index int, id, name, argsDelta string) {
	c := t.calls[index]
	if c == nil {
		c = &openCall{}
		t.calls[index] = c
	}
	if c.named {
		switch {
		case c.client != nil:
			t.clientArgs(c.client, argsDelta)
		case c.code != nil:
			t.codeArgs(c.code, argsDelta)
		}
		return
	}
	c.args.WriteString(argsDelta)
	if name == "" {
		return
	}
	c.named = true
	if name == tools.CodeInterpreterName && t.r.plan.codeInterpreter && t.streamCode && t.err == nil {
		t.openCode(c)
		return
	}
	if t.r.isGatewayCall(name) {
		return
	}
	r := t.r
	fc := &openFunctionCall{idx: len(r.resp.Output), item: FunctionCall{Type: "function_call", ID: newID("fc_"),
		CallID: id, Name: name, Arguments: "", Status: "in_progress", Agent: r.agentRef()}}
	c.client = fc
	r.resp.Output = append(r.resp.Output, fc.item)
	r.emit("response.output_item.added", map[string]any{"output_index": fc.idx, "item": fc.item})
	t.clientArgs(fc, c.args.String())
}

// openCode adds the code_interpreter_call item of c, in the response's
// computer (made now if needed), and streams the code so far.
func (t *turnOutput) openCode(c *openCall) {
	r := t.r
	err := r.ensureComputer(t.ctx)
	denied := errors.Is(err, computer.ErrDeniedByPolicy)
	if err != nil && !denied {
		t.err = err
		return
	}
	oc := &openCode{idx: len(r.resp.Output), item: CodeInterpreterCall{Type: "code_interpreter_call", ID: newID("ci_"),
		Status: "in_progress", ContainerID: r.computerID, Agent: r.agentRef()}, denied: denied}
	c.code = oc
	r.resp.Output = append(r.resp.Output, oc.item)
	r.emit("response.output_item.added", map[string]any{"output_index": oc.idx, "item": oc.item})
	r.emit("response.code_interpreter_call.in_progress", map[string]any{"item_id": oc.item.ID, "output_index": oc.idx})
	t.codeArgs(oc, c.args.String())
}

func (t *turnOutput) codeArgs(oc *openCode, argsDelta string) {
	t.codeDelta(oc, oc.dec.feed(argsDelta))
}

func (t *turnOutput) codeDelta(oc *openCode, delta string) {
	if delta == "" {
		return
	}
	oc.sent.WriteString(delta)
	t.r.emit("response.code_interpreter_call_code.delta", map[string]any{"item_id": oc.item.ID,
		"output_index": oc.idx, "delta": delta})
}

// code is the streamed code_interpreter_call item of the answer's call i
// (nil: not streamed).
func (t *turnOutput) code(i int) *openCode {
	if c := t.calls[i]; c != nil {
		return c.code
	}
	return nil
}

func (t *turnOutput) clientArgs(fc *openFunctionCall, delta string) {
	if delta == "" {
		return
	}
	fc.args.WriteString(delta)
	t.r.emit("response.function_call_arguments.delta", map[string]any{"item_id": fc.item.ID,
		"output_index": fc.idx, "delta": delta})
}

// finish completes the answer's open items with the whole answer (the
// call ids the upstream may have sent late, or the gateway made up).
func (t *turnOutput) finish(tu *turn) {
	r := t.r
	t.finished = true
	if m := t.msg; m != nil {
		t.closeText(m)
		m.item.Status = "completed"
		r.resp.Output[m.idx] = m.item
		r.emit("response.output_item.done", map[string]any{"output_index": m.idx, "item": m.item})
	}
	for i, tc := range tu.calls {
		c := t.calls[i]
		if c != nil && c.code != nil {
			t.finishCode(c.code, tc)
		}
		if c == nil || c.client == nil {
			continue
		}
		fc := c.client
		fc.item.CallID, fc.item.Arguments, fc.item.Status = tc.ID, tc.Function.Arguments, "completed"
		r.emit("response.function_call_arguments.done", map[string]any{"item_id": fc.item.ID,
			"output_index": fc.idx, "arguments": fc.item.Arguments})
		r.resp.Output[fc.idx] = fc.item
		r.emit("response.output_item.done", map[string]any{"output_index": fc.idx, "item": fc.item})
	}
}

// closeText ends the message's text and its part (output_text.done,
// content_part.done) and sets the item's content to the whole text.
func (t *turnOutput) closeText(m *openMessage) {
	text := m.text.String()
	part := OutputText{Type: "output_text", Text: text, Annotations: []any{}}
	d := m.at("text", text)
	d["logprobs"] = []any{}
	t.r.emit("response.output_text.done", d)
	t.r.emit("response.content_part.done", m.at("part", part))
	m.item.Content = []OutputText{part}
}

// finishCode ends a streamed code with the whole call's code (the rest of
// it, when the arguments could not be streamed) and code_done; the call
// stays in progress until the loop runs it.
func (t *turnOutput) finishCode(oc *openCode, tc chatToolCall) {
	code := codeOf(tc.Function.Arguments) // malformed: the tool tells the model
	if rest, ok := strings.CutPrefix(code, oc.sent.String()); ok {
		t.codeDelta(oc, rest)
	}
	oc.item.Code = code
	t.r.resp.Output[oc.idx] = oc.item
	t.r.emit("response.code_interpreter_call_code.done", map[string]any{"item_id": oc.item.ID,
		"output_index": oc.idx, "code": code})
}

// abandon ends an answer that broke before finish: its items keep what
// arrived (the message's text, the arguments and code so far) and stay
// in progress for Run.closeUnfinished; the message's text and part are
// closed (output_text.done, content_part.done), as OpenAI does for a
// message cut short.
func (t *turnOutput) abandon() {
	if t.finished {
		return
	}
	t.finished = true
	r := t.r
	if m := t.msg; m != nil {
		t.closeText(m)
		r.resp.Output[m.idx] = m.item
	}
	for _, c := range t.calls {
		switch {
		case c.client != nil:
			c.client.item.Arguments = c.client.args.String()
			r.resp.Output[c.client.idx] = c.client.item
		case c.code != nil:
			c.code.item.Code = c.code.sent.String()
			r.resp.Output[c.code.idx] = c.code.item
		}
	}
}
