package responses

import (
	"context"
	"encoding/json"
)

// responsesUpstream speaks the Responses API: POST {base}/responses with
// store: false (the gateway keeps the conversation and replays it each
// round). The loop's chat messages map to input items: system, user and
// assistant text become messages, an assistant's tool calls become
// function_call items and tool messages function_call_output items.
type responsesUpstream struct{ httpUpstream }

type responsesRequest struct {
	Model             string          `json:"model"`
	Input             []any           `json:"input"`
	Tools             []responsesTool `json:"tools,omitempty"`
	ToolChoice        json.RawMessage `json:"tool_choice,omitempty"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls,omitempty"`
	Store             bool            `json:"store"`
	Stream            bool            `json:"stream,omitempty"`
	responsesParams
}

// responsesTool is a function tool in the Responses form: the chat
// function's fields, flat (no "function" wrapper); code_interpreter
// reaches the upstream as one.
type responsesTool struct {
	Type string `json:"type"`
	chatFunction
}

// responsesItem is an output item of the upstream's answer.
type responsesItem struct {
	Type    string `json:"type"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type responsesUsage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

func (u *responsesUsage) add(to *Usage) {
	if u != nil {
		to.InputTokens += u.InputTokens
		to.OutputTokens += u.OutputTokens
		to.TotalTokens += u.TotalTokens
	}
}

type responsesAnswer struct {
	Status string          `json:"status"`
	Output []responsesItem `json:"output"`
	Usage  *responsesUsage `json:"usage"`
}

// responsesEvent is one streamed event of the upstream (the fields the
// gateway reads).
type responsesEvent struct {
	Type        string           `json:"type"`
	OutputIndex int              `json:"output_index"`
	Delta       string           `json:"delta"`
	Item        *responsesItem   `json:"item"`
	Response    *responsesAnswer `json:"response"`
}

func toResponsesRequest(req chatRequest, stream bool) responsesRequest {
	out := responsesRequest{Model: req.Model, ParallelToolCalls: req.ParallelToolCalls, Stream: stream,
		ToolChoice: req.ToolChoice, Input: []any{}, responsesParams: req.Params.responses()}
	for _, t := range req.Tools {
		out.Tools = append(out.Tools, responsesTool{Type: "function", chatFunction: t.Function})
	}
	var named struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(req.ToolChoice, &named) == nil && named.Function.Name != "" {
		out.ToolChoice, _ = json.Marshal(map[string]string{"type": "function", "name": named.Function.Name})
	}
	for _, m := range req.Messages {
		switch {
		case m.Role == "tool":
			out.Input = append(out.Input, map[string]any{"type": "function_call_output", "call_id": m.ToolCallID,
				"output": deref(m.Content)})
			continue
		case m.Parts != nil:
			out.Input = append(out.Input, map[string]any{"type": "message", "role": m.Role, "content": responsesParts(m.Parts)})
		case m.Content != nil && *m.Content != "" || len(m.ToolCalls) == 0:
			out.Input = append(out.Input, map[string]any{"type": "message", "role": m.Role, "content": deref(m.Content)})
		}
		for _, tc := range m.ToolCalls {
			out.Input = append(out.Input, map[string]any{"type": "function_call", "call_id": tc.ID,
				"name": tc.Function.Name, "arguments": tc.Function.Arguments})
		}
	}
	return out
}

// responsesParts is a chat message's text and image parts as Responses
// input content.
func responsesParts(parts []chatPart) []any {
	out := make([]any, 0, len(parts))
	for _, p := range parts {
		if p.ImageURL != nil {
			img := map[string]any{"type": "input_image", "image_url": p.ImageURL.URL, "detail": "auto"}
			if p.ImageURL.Detail != "" {
				img["detail"] = p.ImageURL.Detail
			}
			out = append(out, img)
			continue
		}
		out = append(out, map[string]any{"type": "input_text", "text": p.Text})
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func (u *responsesUpstream) complete(ctx context.Context, req chatRequest, sink turnSink) (*turn, error) {
	b := &turnBuilder{sink: sink}
	c, err := u.post(ctx, "/responses", toResponsesRequest(req, u.stream))
	if err != nil {
		return nil, err
	}
	defer c.close()
	if !u.stream {
		return u.whole(c, b)
	}
	return u.streamed(c, b)
}

// whole reads a non-streamed response.
func (u *responsesUpstream) whole(c *call, b *turnBuilder) (*turn, error) {
	data, err := c.readAll()
	if err != nil {
		return nil, err
	}
	var a responsesAnswer
	if err := json.Unmarshal(data, &a); err != nil || a.Output == nil {
		return nil, upstreamError("the upstream answer is not a response")
	}
	if a.Status == "failed" {
		return nil, upstreamError("the upstream model server reported a failed response")
	}
	for _, it := range a.Output {
		if err := b.addItem(it); err != nil {
			return nil, err
		}
	}
	a.Usage.add(&b.usage)
	return b.finish()
}

// streamed reads a streamed response: events until response.completed
// (or response.incomplete).
func (u *responsesUpstream) streamed(c *call, b *turnBuilder) (*turn, error) {
	calls := map[int]int{} // upstream output_index → call index
	done := false
	err := readSSE(c.body(), u.maxBytes, func(_, data string) error {
		var ev responsesEvent
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return upstreamError("the upstream stream has a malformed event")
		}
		switch ev.Type {
		case "response.output_text.delta":
			b.addText(ev.Delta)
		case "response.output_item.added":
			if ev.Item != nil && ev.Item.Type == "function_call" {
				calls[ev.OutputIndex] = len(b.calls)
				return b.addCall(len(b.calls), ev.Item.CallID, ev.Item.Name, ev.Item.Arguments)
			}
		case "response.function_call_arguments.delta":
			if i, ok := calls[ev.OutputIndex]; ok {
				return b.addCall(i, "", "", ev.Delta)
			}
		case "response.output_item.done":
			// Arguments sent whole, without deltas.
			if i, ok := calls[ev.OutputIndex]; ok && ev.Item != nil && b.calls[i].Function.Arguments == "" {
				return b.addCall(i, "", "", ev.Item.Arguments)
			}
		case "response.completed", "response.incomplete":
			if ev.Response != nil {
				ev.Response.Usage.add(&b.usage)
			}
			done = true
			return errStopSSE
		case "response.failed", "error":
			return upstreamError("the upstream model server reported an error mid-stream")
		}
		return nil
	})
	if err != nil {
		return nil, c.fail(err, "reading the upstream stream failed")
	}
	if !done {
		return nil, upstreamError("the upstream stream ended before the answer was complete")
	}
	return b.finish()
}

// addItem adds a whole output item of a non-streamed answer; items other
// than messages and function calls (reasoning, …) are not the gateway's.
func (b *turnBuilder) addItem(it responsesItem) error {
	switch it.Type {
	case "message":
		for _, p := range it.Content {
			if p.Type == "output_text" {
				b.addText(p.Text)
			}
		}
	case "function_call":
		return b.addCall(len(b.calls), it.CallID, it.Name, it.Arguments)
	}
	return nil
}
