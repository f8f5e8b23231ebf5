package responses

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// Chat Completions wire types (the subset the gateway speaks). The loop
// keeps its conversation in this form whatever the upstream's API.
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
	// Params are the client's model parameters, sent in each upstream
	// API's own names.
	Params *Params `json:"-"`
}

// turn is one upstream answer, whatever the upstream's API: the
// assistant's text, its tool calls in model order, and the usage.
type turn struct {
	text  string
	calls []chatToolCall
	usage Usage
}

// turnSink receives an upstream answer as it arrives: text fragments, and
// tool call fragments keyed by the call's position in the answer (id and
// name come with a call's first fragment, arguments in pieces).
type turnSink interface {
	text(delta string)
	call(index int, id, name, argsDelta string)
}

// upstreamAPI is one upstream model server.
type upstreamAPI interface {
	// complete sends req and returns the answer, reporting its fragments
	// to sink as they arrive. Failures are *Error (502) with a fixed
	// message, or the parent context's error.
	complete(ctx context.Context, req chatRequest, sink turnSink) (*turn, error)
}

// maxTurnCalls bounds the tool calls of one upstream answer.
const maxTurnCalls = 128

// turnBuilder accumulates an answer's fragments and forwards them to the
// sink.
type turnBuilder struct {
	sink  turnSink
	text  strings.Builder
	calls []chatToolCall
	usage Usage
}

func (b *turnBuilder) addText(delta string) {
	if delta == "" {
		return
	}
	b.text.WriteString(delta)
	b.sink.text(delta)
}

func (b *turnBuilder) addCall(index int, id, name, argsDelta string) error {
	if index < 0 || index >= maxTurnCalls {
		return upstreamError("the upstream answer has a tool call index out of range")
	}
	for len(b.calls) <= index {
		b.calls = append(b.calls, chatToolCall{Type: "function"})
	}
	c := &b.calls[index]
	if c.ID == "" {
		c.ID = id
	}
	if c.Function.Name == "" {
		c.Function.Name = name
	}
	c.Function.Arguments += argsDelta
	b.sink.call(index, c.ID, c.Function.Name, argsDelta)
	return nil
}

// finish is the accumulated turn; a call without a name is malformed, one
// without an id gets one (the loop needs ids to pair outputs with calls).
func (b *turnBuilder) finish() (*turn, error) {
	for i := range b.calls {
		if b.calls[i].Function.Name == "" {
			return nil, upstreamError("the upstream answer has a tool call without a name")
		}
		if b.calls[i].ID == "" {
			b.calls[i].ID = newID("call_")
		}
	}
	return &turn{text: b.text.String(), calls: b.calls, usage: b.usage}, nil
}

// httpUpstream is what every upstream client shares: where, the key,
// the HTTP client and the limits of one call.
type httpUpstream struct {
	url      string // base URL, e.g. https://api.openai.com/v1
	key      string
	client   *http.Client
	timeout  time.Duration // the whole call
	idle     time.Duration // between two reads of a streamed answer
	maxBytes int64
	stream   bool // ask for a streamed answer
}

// call is one upstream HTTP call in progress.
type call struct {
	u      *httpUpstream
	parent context.Context
	ctx    context.Context
	cancel context.CancelFunc
	resp   *http.Response
	idled  atomic.Bool
	timer  *time.Timer
}

// post sends body to base+path; the caller reads c.body() and calls
// c.close(). Transport failures and non-2xx answers are upstream errors
// (the answer's body is never read or forwarded).
func (u *httpUpstream) post(ctx context.Context, path string, body any) (*call, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	c := &call{u: u, parent: ctx}
	c.ctx, c.cancel = context.WithTimeout(ctx, u.timeout)
	hr, err := http.NewRequestWithContext(c.ctx, "POST", strings.TrimSuffix(u.url, "/")+path, bytes.NewReader(data))
	if err != nil {
		c.cancel()
		return nil, upstreamError("the upstream URL is invalid")
	}
	hr.Header.Set("Content-Type", "application/json")
	if u.stream {
		hr.Header.Set("Accept", "text/event-stream")
	}
	if u.key != "" {
		hr.Header.Set("Authorization", "Bearer "+u.key)
	}
	if u.stream && u.idle > 0 {
		// Waiting for the headers counts as idle too: a stalled server
		// fails after idle, not after the whole call's timeout.
		c.timer = time.AfterFunc(u.idle, func() { c.idled.Store(true); c.cancel() })
	}
	c.resp, err = u.client.Do(hr)
	if err != nil {
		err = c.fail(err, "the upstream model server is unreachable")
		c.close()
		return nil, err
	}
	if c.resp.StatusCode/100 != 2 {
		code := c.resp.StatusCode
		c.close()
		return nil, upstreamError("the upstream model server answered HTTP %d", code)
	}
	if u.stream {
		mt, _, _ := mime.ParseMediaType(c.resp.Header.Get("Content-Type"))
		if mt != "text/event-stream" {
			c.close()
			return nil, upstreamError("the upstream model server did not stream its answer (it must support stream: true)")
		}
	}
	return c, nil
}

// body is the answer's body; a streamed one resets the idle timer at
// every read.
func (c *call) body() io.Reader {
	if c.timer == nil {
		return c.resp.Body
	}
	return idleReader{c}
}

type idleReader struct{ c *call }

func (r idleReader) Read(p []byte) (int, error) {
	n, err := r.c.resp.Body.Read(p)
	if n > 0 {
		r.c.timer.Reset(r.c.u.idle)
	}
	return n, err
}

func (c *call) close() {
	if c.timer != nil {
		c.timer.Stop()
	}
	if c.resp != nil {
		c.resp.Body.Close()
	}
	c.cancel()
}

// fail translates a transport or read error: the client left (the
// parent's error), the upstream went quiet or ran out of time, or other.
func (c *call) fail(err error, other string) error {
	switch {
	case c.parent.Err() != nil:
		return c.parent.Err()
	case c.idled.Load():
		return upstreamError("the upstream model server sent nothing for %s", c.u.idle)
	case errors.Is(c.ctx.Err(), context.DeadlineExceeded):
		return upstreamError("the upstream model server did not answer within %s", c.u.timeout)
	case errors.Is(err, errSSELine):
		return upstreamError("the upstream stream has a line over %d bytes", maxSSELine)
	case errors.Is(err, errSSETotal):
		return upstreamError("the upstream answer exceeds %d bytes", c.u.maxBytes)
	}
	var ge *Error
	if errors.As(err, &ge) {
		return err
	}
	return upstreamError("%s", other)
}

// readAll reads a non-streamed answer, bounded by maxBytes.
func (c *call) readAll() ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(c.body(), c.u.maxBytes+1))
	if err != nil {
		return nil, c.fail(err, "reading the upstream answer failed")
	}
	if int64(len(data)) > c.u.maxBytes {
		return nil, upstreamError("the upstream answer exceeds %d bytes", c.u.maxBytes)
	}
	return data, nil
}
