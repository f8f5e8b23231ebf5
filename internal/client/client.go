package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// DefaultMaxAnswer bounds a JSON answer (a python answer holds every
// output of its cells).
const DefaultMaxAnswer = 64 << 20

// Config says which server a Client talks to and how.
type Config struct {
	URL string // http:// or https://, e.g. http://127.0.0.1:8080
	Key string // the API key, sent as a bearer token ("": none)
	// HTTPClient sends the requests; nil: a client of its own.
	HTTPClient *http.Client
	// MaxAnswer bounds a JSON answer, MaxLine and MaxEvent an event
	// stream (0: the defaults).
	MaxAnswer         int64
	MaxLine, MaxEvent int
}

// Client is a client of Cubicle's REST API. It is safe for concurrent use.
type Client struct {
	base string
	key  string
	hc   *http.Client
	cfg  Config
}

// New checks cfg and returns its client.
func New(cfg Config) (*Client, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%q is not an http:// or https:// URL", cfg.URL)
	}
	if cfg.MaxAnswer <= 0 {
		cfg.MaxAnswer = DefaultMaxAnswer
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	return &Client{base: strings.TrimRight(u.String(), "/"), key: cfg.Key, hc: hc, cfg: cfg}, nil
}

// URL is the server's base URL, without a trailing slash.
func (c *Client) URL() string { return c.base }

// Close closes the idle connections of the client's HTTP client.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// Error is an error answer of the server: a status other than the one the
// call expects, or an error event in a stream (Status 0).
type Error struct {
	Method, Path string
	Status       int    // HTTP status; 0 for an error event
	Type         string // OpenAI's class of the status (invalid_request_error, …)
	Code         string // the API's error code (not_found, computer_gone, …)
	Message      string
	Param        string // the request field it is about, if any
	RequestID    string // the server's id of the request (its logs name it), if it said
}

func (e *Error) Error() string {
	s := e.Method + " " + e.Path + ": "
	if e.Status != 0 {
		s += fmt.Sprintf("HTTP %d ", e.Status)
	} else {
		s += "error event "
	}
	if e.Code != "" {
		s += e.Code + ": "
	}
	s += e.Message
	if e.RequestID != "" {
		s += " (request " + e.RequestID + ")"
	}
	return s
}

// errorBody is the API's error body, also the data of an error event.
type errorBody struct {
	Error *struct {
		Type      string  `json:"type"`
		Code      string  `json:"code"`
		Message   string  `json:"message"`
		Param     *string `json:"param"`
		RequestID string  `json:"request_id"`
	} `json:"error"`
}

// decodeError makes the *Error of an error answer or event (requestID:
// the answer's X-Request-Id); a body that is not the API's error shape
// becomes its message, shortened.
func decodeError(method, path string, status int, requestID string, body []byte) *Error {
	e := &Error{Method: method, Path: path, Status: status, RequestID: requestID}
	var eb errorBody
	if json.Unmarshal(body, &eb) == nil && eb.Error != nil && (eb.Error.Code != "" || eb.Error.Message != "") {
		e.Type, e.Code, e.Message = eb.Error.Type, eb.Error.Code, eb.Error.Message
		if eb.Error.Param != nil {
			e.Param = *eb.Error.Param
		}
		if eb.Error.RequestID != "" {
			e.RequestID = eb.Error.RequestID
		}
		return e
	}
	msg := strings.ToValidUTF8(strings.TrimSpace(string(body[:min(len(body), 300)])), "?")
	if msg == "" {
		msg = http.StatusText(status)
	}
	e.Message = msg
	return e
}

// send sends a request: body is nil (none), []byte or json.RawMessage (as
// it is) or a value encoded as JSON.
func (c *Client) send(ctx context.Context, method, path string, body any, accept string) (*http.Response, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case json.RawMessage:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", accept)
	res, err := c.hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is in the message already
		}
		return nil, fmt.Errorf("%s %s%s: %w", method, c.base, path, err)
	}
	return res, nil
}

// readAnswer reads a whole answer, at most MaxAnswer bytes.
func (c *Client) readAnswer(method, path string, res *http.Response) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(res.Body, c.cfg.MaxAnswer+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	case int64(len(b)) > c.cfg.MaxAnswer:
		return nil, fmt.Errorf("%s %s: the answer is larger than %d bytes", method, path, c.cfg.MaxAnswer)
	}
	return b, nil
}

// Do sends a request for a route without a method of its own and decodes
// the JSON answer into out (nil: discard it). A status other than want is
// an *Error. It returns the answer's header (Server-Timing, …).
func (c *Client) Do(ctx context.Context, method, path string, body any, want int, out any) (http.Header, error) {
	res, err := c.send(ctx, method, path, body, "application/json")
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := c.readAnswer(method, path, res)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != want {
		return nil, decodeError(method, path, res.StatusCode, requestID(res), b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return nil, fmt.Errorf("%s %s: decode the answer: %w", method, path, err)
		}
	}
	return res.Header, nil
}

// Stop, returned by a Stream callback, ends the stream without error.
var Stop = errors.New("stop the event stream")

// Stream posts body with Accept: text/event-stream and calls fn for each
// event until the stream ends or fn returns an error; fn returning Stop
// ends the call without error. A status other than 200 is an *Error, and
// a 200 that is not an event stream is an error.
func (c *Client) Stream(ctx context.Context, path string, body any, fn func(Event) error) error {
	return c.stream(ctx, path, body, false, fn)
}

// stream is Stream; with view, an event's Data is valid only during fn
// (EventReader.View: no copy).
func (c *Client) stream(ctx context.Context, path string, body any, view bool, fn func(Event) error) error {
	const method = http.MethodPost
	res, err := c.send(ctx, method, path, body, "text/event-stream")
	if err != nil {
		return err
	}
	stopped := false
	defer func() {
		if stopped {
			// Closing a stream whose end was not read tears its
			// connection down, and waits for the transport's reader to
			// let go of it: the caller, who has what it wanted, does not
			// wait for that.
			go res.Body.Close()
			return
		}
		res.Body.Close()
	}()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
		return decodeError(method, path, res.StatusCode, requestID(res), b)
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		return fmt.Errorf("%s %s: the answer is %q, not an event stream", method, path, ct)
	}
	er := NewEventReader(res.Body, c.cfg.MaxLine, c.cfg.MaxEvent)
	next := er.Next
	if view {
		next = er.View
	}
	for {
		ev, err := next()
		if err == nil {
			err = fn(ev)
		}
		var ce *Error
		switch {
		case err == nil:
		case errors.As(err, &ce):
			return err
		case errors.Is(err, Stop):
			stopped = true
			return nil
		case err == io.EOF:
			return nil
		case ctx.Err() != nil:
			return fmt.Errorf("%s %s: %w", method, path, ctx.Err())
		default:
			return fmt.Errorf("%s %s (event stream): %w", method, path, err)
		}
	}
}

// eventError is the *Error of an error event.
func eventError(method, path string, data []byte) error {
	return decodeError(method, path, 0, "", data)
}

// requestID is the server's id of the request an answer is for.
func requestID(res *http.Response) string {
	id := res.Header.Get("X-Request-Id")
	if len(id) > 64 { // a hostile server's; the API's are short
		return ""
	}
	return strings.ToValidUTF8(id, "?")
}
