package responses

import (
	"context"
	"encoding/json"
)

// chatUpstream speaks Chat Completions: POST {base}/chat/completions,
// streamed (stream: true with include_usage) unless configured otherwise.
type chatUpstream struct{ httpUpstream }

type chatUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

func (u *chatUsage) add(to *Usage) {
	if u != nil {
		to.InputTokens += u.PromptTokens
		to.OutputTokens += u.CompletionTokens
		to.TotalTokens += u.TotalTokens
	}
}

type chatResponse struct {
	Choices []struct {
		Message      chatMessage `json:"message"`
		FinishReason string      `json:"finish_reason"`
	} `json:"choices"`
	Usage *chatUsage `json:"usage"`
}

// chatBody is what is posted: the request, the model parameters in
// Chat Completions' names, and the stream flags when streaming.
type chatBody struct {
	chatRequest
	chatParams
	Stream        bool            `json:"stream,omitempty"`
	StreamOptions map[string]bool `json:"stream_options,omitempty"`
}

// chatChunk is one chunk of a streamed chat completion.
type chatChunk struct {
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content   *string `json:"content"`
			ToolCalls []struct {
				Index    *int   `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *chatUsage      `json:"usage"`
	Error json.RawMessage `json:"error"`
}

func (u *chatUpstream) complete(ctx context.Context, req chatRequest, sink turnSink) (*turn, error) {
	b := &turnBuilder{sink: sink}
	body := chatBody{chatRequest: req, chatParams: req.Params.chat()}
	if u.stream {
		body.Stream, body.StreamOptions = true, map[string]bool{"include_usage": true}
	}
	c, err := u.post(ctx, "/chat/completions", body)
	if err != nil {
		return nil, err
	}
	defer c.close()
	if !u.stream {
		return u.whole(c, b)
	}
	return u.streamed(c, b)
}

// whole reads a non-streamed chat completion.
func (u *chatUpstream) whole(c *call, b *turnBuilder) (*turn, error) {
	data, err := c.readAll()
	if err != nil {
		return nil, err
	}
	var out chatResponse
	if err := json.Unmarshal(data, &out); err != nil || len(out.Choices) == 0 {
		return nil, upstreamError("the upstream answer is not a chat completion")
	}
	msg := out.Choices[0].Message
	if msg.Content != nil {
		b.addText(*msg.Content)
	}
	for i, tc := range msg.ToolCalls {
		if err := b.addCall(i, tc.ID, tc.Function.Name, tc.Function.Arguments); err != nil {
			return nil, err
		}
	}
	out.Usage.add(&b.usage)
	return b.finish()
}

// streamed reads a streamed chat completion: chunks until [DONE] (or a
// finish_reason, for servers that send no [DONE]).
func (u *chatUpstream) streamed(c *call, b *turnBuilder) (*turn, error) {
	done, finished := false, false
	err := readSSE(c.body(), u.maxBytes, func(_, data string) error {
		if data == "[DONE]" {
			done = true
			return errStopSSE
		}
		var ch chatChunk
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			return upstreamError("the upstream stream has a malformed chunk")
		}
		if len(ch.Error) > 0 && string(ch.Error) != "null" {
			return upstreamError("the upstream model server reported an error mid-stream")
		}
		ch.Usage.add(&b.usage)
		for _, choice := range ch.Choices {
			if choice.Index != 0 {
				continue // the gateway asks for one choice
			}
			if choice.Delta.Content != nil {
				b.addText(*choice.Delta.Content)
			}
			for j, tc := range choice.Delta.ToolCalls {
				idx := j
				switch {
				case tc.Index != nil:
					idx = *tc.Index
				case tc.ID != "": // no index: a new call per id …
					idx = len(b.calls)
				case len(b.calls) > 0: // … and fragments continue the last one
					idx = len(b.calls) - 1
				}
				if err := b.addCall(idx, tc.ID, tc.Function.Name, tc.Function.Arguments); err != nil {
					return err
				}
			}
			if choice.FinishReason != nil && *choice.FinishReason != "" {
				finished = true
			}
		}
		return nil
	})
	if err != nil {
		return nil, c.fail(err, "reading the upstream stream failed")
	}
	if !done && !finished {
		return nil, upstreamError("the upstream stream ended before the answer was complete")
	}
	return b.finish()
}
