package gateway

import (
	"strings"

	"github.com/cubicle-sandbox/cubicle/internal/tools"
)

// turnOutput turns one upstream answer, as it arrives, into output items
// and their events: text becomes a message item (added at the first
// fragment, one output_text.delta per fragment), a client function call
// becomes a function_call item (added when its name is known, one
// function_call_arguments.delta per fragment). Gateway tool calls are
// not shown here: the loop runs them after the answer, in model order.
// Each item takes its output_index when it is added.
type turnOutput struct {
	r     *Run
	msg   *openMessage
	calls map[int]*openCall // by the call's index in the answer
}

type openMessage struct {
	idx  int
	item Message
	text strings.Builder
}

type openCall struct {
	args   strings.Builder // fragments before the name was known
	client *openFunctionCall
	named  bool
}

type openFunctionCall struct {
	idx  int
	item FunctionCall
	args strings.Builder
}

func newTurnOutput(r *Run) *turnOutput { return &turnOutput{r: r, calls: map[int]*openCall{}} }

// isGatewayCall reports whether name is one of the gateway's tools the
// request offered (run by the gateway, never shown as a function_call).
func (r *Run) isGatewayCall(name string) bool {
	return (name == tools.CodeInterpreterName && r.plan.codeInterpreter) || r.plan.gatewayTools[name]
}

func (t *turnOutput) text(delta string) {
	r := t.r
	if t.msg == nil {
		t.msg = &openMessage{idx: len(r.resp.Output), item: Message{Type: "message", ID: newID("msg_"),
			Role: "assistant", Status: "in_progress", Content: []OutputText{}}}
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
		if c.client != nil {
			t.clientArgs(c.client, argsDelta)
		}
		return
	}
	c.args.WriteString(argsDelta)
	if name == "" {
		return
	}
	c.named = true
	if t.r.isGatewayCall(name) {
		return
	}
	r := t.r
	fc := &openFunctionCall{idx: len(r.resp.Output), item: FunctionCall{Type: "function_call", ID: newID("fc_"),
		CallID: id, Name: name, Arguments: "", Status: "in_progress"}}
	c.client = fc
	r.resp.Output = append(r.resp.Output, fc.item)
	r.emit("response.output_item.added", map[string]any{"output_index": fc.idx, "item": fc.item})
	t.clientArgs(fc, c.args.String())
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
	if m := t.msg; m != nil {
		text := m.text.String()
		part := OutputText{Type: "output_text", Text: text, Annotations: []any{}}
		d := m.at("text", text)
		d["logprobs"] = []any{}
		r.emit("response.output_text.done", d)
		r.emit("response.content_part.done", m.at("part", part))
		m.item.Status, m.item.Content = "completed", []OutputText{part}
		r.resp.Output[m.idx] = m.item
		r.emit("response.output_item.done", map[string]any{"output_index": m.idx, "item": m.item})
	}
	for i, tc := range tu.calls {
		c := t.calls[i]
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

// addMessage adds a whole assistant message (as if streamed in one piece).
func (r *Run) addMessage(text string) {
	t := newTurnOutput(r)
	t.text(text)
	t.finish(&turn{text: text})
}
