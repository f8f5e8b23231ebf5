package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"
)

// Chat Completions wire types (the subset the gateway speaks).
type chatMessage struct {
	Role       string         `json:"role"`
	Content    *string        `json:"content"`
	ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
	// Parts, when set, is sent as the content instead of Content (user
	// messages with images); see chatcontent.go.
	Parts []chatPart `json:"-"`
}

type chatToolCall struct {
	ID       string           `json:"id"`
	Type     string           `json:"type"`
	Function chatCallFunction `json:"function"`
}

type chatCallFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type chatTool struct {
	Type     string       `json:"type"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

type chatRequest struct {
	Model      string          `json:"model"`
	Messages   []chatMessage   `json:"messages"`
	Tools      []chatTool      `json:"tools,omitempty"`
	ToolChoice json.RawMessage `json:"tool_choice,omitempty"`
	// ParallelToolCalls is the client's value, sent only with tools.
	ParallelToolCalls *bool `json:"parallel_tool_calls,omitempty"`
}

type chatResponse struct {
	Choices []struct {
		Message      chatMessage `json:"message"`
		FinishReason string      `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
}

// upstream is a Chat Completions client.
type upstream struct {
	url      string // base URL, e.g. https://api.openai.com/v1
	key      string
	client   *http.Client
	timeout  time.Duration
	maxBytes int64
}

func (u *upstream) chat(ctx context.Context, req chatRequest) (*chatResponse, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, u.timeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, "POST", strings.TrimSuffix(u.url, "/")+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return nil, upstreamError("the upstream URL is invalid")
	}
	hr.Header.Set("Content-Type", "application/json")
	if u.key != "" {
		hr.Header.Set("Authorization", "Bearer "+u.key)
	}
	resp, err := u.client.Do(hr)
	if err != nil {
		switch {
		case parent.Err() != nil:
			return nil, parent.Err()
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			return nil, upstreamError("the upstream model server did not answer within %s", u.timeout)
		}
		return nil, upstreamError("the upstream model server is unreachable")
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, u.maxBytes+1))
	if err != nil {
		if ctx.Err() != nil {
			return nil, upstreamError("the upstream model server did not answer within %s", u.timeout)
		}
		return nil, upstreamError("reading the upstream answer failed")
	}
	if int64(len(data)) > u.maxBytes {
		return nil, upstreamError("the upstream answer exceeds %d bytes", u.maxBytes)
	}
	if resp.StatusCode/100 != 2 {
		return nil, upstreamError("the upstream model server answered HTTP %d", resp.StatusCode)
	}
	var out chatResponse
	if err := json.Unmarshal(data, &out); err != nil || len(out.Choices) == 0 {
		return nil, upstreamError("the upstream answer is not a chat completion")
	}
	return &out, nil
}
