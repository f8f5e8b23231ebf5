package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/errdefs/errhttp"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/responses"
)

// WebSocket mode of /v1/responses (GET with an upgrade, as openai-go's
// Responses.Connect dials it): the client sends text frames
// {"type":"response.create", …the POST body's fields…, "stream_id"?}, the
// server answers each with the streaming events, one JSON object per
// text frame, responses strictly one after another. A bad frame is
// answered with an "error" event and the connection stays usable.
const (
	// wsQueue bounds the response.create frames read ahead of the one
	// running; beyond it the server stops reading until one finishes.
	wsQueue = 4
	// wsWriteTimeout bounds sending one event to a client that stopped reading.
	wsWriteTimeout = 30 * time.Second
)

// wsFrame is one frame read from the client.
type wsFrame struct {
	typ  websocket.MessageType
	data []byte
}

// responsesSocket is GET /v1/responses: the WebSocket transport.
func (a *API) responsesSocket(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	if r.Header.Get("Upgrade") == "" {
		return a.listResponses(w, r, p) // without Upgrade: the stored responses
	}
	g := a.gateway
	if g == nil {
		return errNoGateway
	}
	if !a.sockets.add() {
		return fmt.Errorf("%w: %s", computer.ErrUnavailable, errhttp.ShuttingDownSentence)
	}
	defer a.sockets.wg.Done()
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return nil // Accept answered the client
	}
	c.SetReadLimit(MaxJSONBody)
	// The connection's context: ends when the client goes (the reader
	// sees it) or the server shuts down, which cancels the running
	// response and deletes its computer.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	defer context.AfterFunc(a.sockets.ctx, func() {
		c.Close(websocket.StatusGoingAway, errhttp.ShuttingDownSentence)
		cancel()
	})()
	frames := make(chan wsFrame, wsQueue)
	go func() {
		defer cancel()
		defer close(frames)
		for {
			// Not ctx: a cancelled read drops the connection without a
			// close frame. Read ends when the connection closes.
			typ, data, err := c.Read(context.WithoutCancel(ctx))
			if err != nil {
				return
			}
			select {
			case frames <- wsFrame{typ, data}:
			case <-ctx.Done():
				return
			}
		}
	}()
	s := &socket{c: c, ctx: ctx, cancel: cancel, r: r}
	for f := range frames {
		s.serve(g, p, f)
	}
	c.Close(websocket.StatusNormalClosure, "")
	return nil
}

// sockets tracks the open WebSocket connections.
type sockets struct {
	ctx    context.Context // cancelled by CloseSockets
	cancel context.CancelFunc
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// add counts a new connection; false once closing.
func (s *sockets) add() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	return true
}

// CloseSockets ends the Responses WebSocket connections (their running
// responses are cancelled and their computers deleted) and waits for them
// until ctx ends; call it when the server shuts down, after
// http.Server.Shutdown. Later upgrades are refused (503).
func (a *API) CloseSockets(ctx context.Context) error {
	a.sockets.mu.Lock()
	a.sockets.closed = true
	a.sockets.mu.Unlock()
	a.sockets.cancel()
	done := make(chan struct{})
	go func() {
		a.sockets.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("websocket connections still open: %w", ctx.Err())
	}
}

// socket is one WebSocket connection's writer side.
type socket struct {
	c      *websocket.Conn
	ctx    context.Context
	cancel context.CancelFunc
	r      *http.Request
}

// send writes one event; a failed write ends the connection.
func (s *socket) send(v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(s.ctx, wsWriteTimeout)
	defer cancel()
	if err := s.c.Write(ctx, websocket.MessageText, data); err != nil {
		s.cancel()
		return err
	}
	return nil
}

// fail answers a frame that started no response with an error event.
func (s *socket) fail(err error, streamID string) {
	code, body := errorBody(s.r, err)
	ev := map[string]any{"type": "error", "status": code, "sequence_number": 0, "error": body}
	if streamID != "" {
		ev["stream_id"] = streamID
	}
	s.send(ev)
}

// serve runs one frame: a response.create to completion, or an error event.
func (s *socket) serve(g *responses.Gateway, p governance.Principal, f wsFrame) {
	if f.typ != websocket.MessageText {
		s.fail(fmt.Errorf("%w: send JSON events as text frames", errBadRequest), "")
		return
	}
	var head struct {
		Type     string `json:"type"`
		StreamID any    `json:"stream_id"`
	}
	var fields map[string]json.RawMessage
	if err := checkJSON(f.data, reflect.TypeOf(head)); err != nil { // before the map folds duplicates
		s.fail(err, "")
		return
	}
	if err := json.Unmarshal(f.data, &fields); err != nil || json.Unmarshal(f.data, &head) != nil {
		s.fail(fmt.Errorf("%w: a frame must be one JSON object", errBadRequest), "")
		return
	}
	streamID, ok := head.StreamID.(string)
	if head.StreamID != nil && (!ok || !validStreamID(streamID)) {
		s.fail(withParam("stream_id", fmt.Errorf("%w: stream_id must be 1-256 ASCII letters, digits, '_', '-' or '.'", errBadRequest)), "")
		return
	}
	if head.Type != "response.create" {
		s.fail(withParam("type", fmt.Errorf("%w: unsupported event type %q; send response.create", errBadRequest, head.Type)), streamID)
		return
	}
	delete(fields, "type")
	delete(fields, "stream_id")
	body, _ := json.Marshal(fields)
	var req responses.Request
	if err := decodeFrom(bytes.NewReader(body), &req); err != nil {
		s.fail(err, streamID)
		return
	}
	req.Origin = origin(s.r)
	if req.Background != nil && *req.Background {
		s.fail(withParam("background", fmt.Errorf("%w: background responses are created with POST /v1/responses; over a WebSocket a response runs while the connection is open", errBadRequest)), streamID)
		return
	}
	run, err := g.Begin(s.ctx, p, &req)
	if err != nil {
		s.fail(err, streamID)
		return
	}
	// After the response's last event; the next response does not wait
	// for the delete.
	defer run.Close(s.ctx)
	_, err = run.Do(s.ctx, func(ev responses.Event) error {
		if streamID != "" {
			ev.Fields["stream_id"] = streamID
		}
		return s.send(ev)
	})
	streamFailed(s.ctx, err, "response over WebSocket failed")
}

// validStreamID is openai-go's rule for a stream_id.
func validStreamID(id string) bool {
	if len(id) == 0 || len(id) > 256 {
		return false
	}
	for _, ch := range []byte(id) {
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '_' || ch == '-' || ch == '.') {
			return false
		}
	}
	return true
}
