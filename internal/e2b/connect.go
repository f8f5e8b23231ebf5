package e2b

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
	"github.com/cubicle-sandbox/cubicle/internal/strictjson"
)

// The Connect protocol (connectrpc.com/docs/protocol), as the SDK's
// transport speaks it: JSON messages (the SDK sets useBinaryFormat
// false), no compression. A unary call is a POST of application/json
// answered with the message or an error {code, message} and its HTTP
// status. A server-streaming call POSTs one enveloped message
// (application/connect+json; an envelope is a flags byte, a 4-byte
// big-endian length and the message) and is answered 200 with enveloped
// messages, the last one flagged end-of-stream (0x02) carrying
// {"error"?: {code, message}}. The messages follow protobuf's JSON
// mapping of envd's process.proto and filesystem.proto (camelCase
// fields, int64 as strings, bytes as base64, enums by name).

// maxRPCMessage bounds a request's message.
const maxRPCMessage = 1 << 20

const (
	flagEndStream = 0x02
	flagCompress  = 0x01
)

// rpcError is a Connect error: code is one of Connect's code names.
type rpcError struct {
	Code    string `json:"code"`
	Message string `json:"message,omitempty"`
}

func (e *rpcError) Error() string { return e.Code + ": " + e.Message }

// Connect's codes of the errors Cubicle's layers answer.
var connectCodes = map[errdefs.Kind]string{
	errdefs.Unauthenticated:     "unauthenticated",
	errdefs.PermissionDenied:    "permission_denied",
	errdefs.NotFound:            "not_found",
	errdefs.Conflict:            "failed_precondition",
	errdefs.ResourceExhausted:   "resource_exhausted",
	errdefs.TooLarge:            "resource_exhausted",
	errdefs.Timeout:             "deadline_exceeded",
	errdefs.InvalidArgument:     "invalid_argument",
	errdefs.Unavailable:         "unavailable",
	errdefs.InsufficientStorage: "resource_exhausted",
	errdefs.BadGateway:          "unavailable",
	errdefs.FailedPrecondition:  "failed_precondition",
	errdefs.MethodNotAllowed:    "unimplemented",
}

// connectStatus is the HTTP status of a unary call's error of each code.
var connectStatus = map[string]int{
	"canceled": 499, "unknown": 500, "invalid_argument": 400, "deadline_exceeded": 504,
	"not_found": 404, "already_exists": 409, "permission_denied": 403, "resource_exhausted": 429,
	"failed_precondition": 400, "aborted": 409, "out_of_range": 400, "unimplemented": 501,
	"internal": 500, "unavailable": 503, "data_loss": 500, "unauthenticated": 401,
}

// toRPCError is err as a Connect error.
func toRPCError(ctx context.Context, err error) *rpcError {
	var re *rpcError
	if errors.As(err, &re) {
		return re
	}
	if errors.Is(err, context.Canceled) {
		return &rpcError{Code: "canceled", Message: "the call was cancelled"}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &rpcError{Code: "deadline_exceeded", Message: "the call's deadline passed"}
	}
	kind, _ := errdefs.Of(err)
	code, ok := connectCodes[kind]
	_, msg := message(ctx, err)
	if !ok {
		code = "internal"
	}
	return &rpcError{Code: code, Message: msg}
}

// unimplemented answers an RPC Cubicle does not serve.
func unimplemented(name string) *rpcError {
	return &rpcError{Code: "unimplemented", Message: name + " is not supported by Cubicle (docs/e2b.md)"}
}

// rpcInvalid is an invalid_argument error.
func rpcInvalid(format string, args ...any) *rpcError {
	return &rpcError{Code: "invalid_argument", Message: fmt.Sprintf(format, args...)}
}

// unaryHandler answers a unary call: the decoded request in, the answer
// out.
type unaryHandler[Req, Res any] func(ctx context.Context, b *box, req *Req) (*Res, error)

// unary serves a unary Connect call with JSON messages.
func unary[Req, Res any](h unaryHandler[Req, Res]) boxHandler {
	return func(w http.ResponseWriter, r *http.Request, b *box) {
		res, err := func() (*Res, error) {
			if ct := r.Header.Get("Content-Type"); !isJSON(ct, "application/json") {
				return nil, &rpcError{Code: "unimplemented", Message: "Cubicle serves Connect with JSON only (Content-Type " + ct + ")"}
			}
			data, err := io.ReadAll(io.LimitReader(r.Body, maxRPCMessage+1))
			if err != nil {
				// The client's doing (a stalled or cut body), not a deadline
				// of the server's (deadline_exceeded would be a 504).
				return nil, &rpcError{Code: "invalid_argument", Message: "the request message could not be read: " + err.Error()}
			}
			if len(data) > maxRPCMessage {
				return nil, &rpcError{Code: "resource_exhausted", Message: "the request message is over 1 MiB"}
			}
			req := new(Req)
			if err := unmarshal(data, req); err != nil {
				return nil, err
			}
			return h(r.Context(), b, req)
		}()
		if err != nil {
			re := toRPCError(r.Context(), err)
			status, ok := connectStatus[re.Code]
			if !ok {
				status = 500
			}
			writeJSON(w, status, re)
			return
		}
		writeJSON(w, http.StatusOK, res)
	}
}

// isJSON reports whether a Content-Type is want (parameters aside).
func isJSON(ct, want string) bool {
	ct, _, _ = strings.Cut(ct, ";")
	return strings.TrimSpace(ct) == want
}

func unmarshal(data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	if err := strictjson.Check(data, nil); err != nil {
		return rpcInvalid("the request message gives a key twice: %v", err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return rpcInvalid("the request message is not the JSON expected: %v", err)
	}
	return nil
}

// stream is the answer of a server-streaming call: messages are sent as
// they come (each flushed), from any goroutine.
type stream struct {
	mu     sync.Mutex
	w      http.ResponseWriter
	rc     *http.ResponseController
	closed bool
	err    error // the first write error: the client went away
}

// send writes one message.
func (s *stream) send(msg any) error {
	data, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	return s.frame(0, data)
}

func (s *stream) frame(flags byte, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	if s.closed {
		return errors.New("e2b: a message after the end of the stream")
	}
	var hdr [5]byte
	hdr[0] = flags
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(data)))
	if _, err := s.w.Write(hdr[:]); err != nil {
		s.err = err
		return err
	}
	if _, err := s.w.Write(data); err != nil {
		s.err = err
		return err
	}
	if err := s.rc.Flush(); err != nil {
		s.err = err
	}
	return s.err
}

// end ends the stream with err (nil: success).
func (s *stream) end(ctx context.Context, err error) {
	var body struct {
		Error *rpcError `json:"error,omitempty"`
	}
	if err != nil {
		body.Error = toRPCError(ctx, err)
	}
	data, _ := json.Marshal(body)
	s.frame(flagEndStream, data)
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
}

// keepalive sends msg every interval until stop is closed.
func (s *stream) keepalive(interval time.Duration, msg any, stop <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if s.send(msg) != nil {
				return
			}
		}
	}
}

// keepaliveInterval is the interval the client asks for
// (Keepalive-Ping-Interval, seconds; the SDK sends 50), at least 1 s and
// at most 60 s.
func keepaliveInterval(r *http.Request) time.Duration {
	n, err := strconv.Atoi(r.Header.Get("Keepalive-Ping-Interval"))
	if err != nil || n <= 0 {
		n = 50
	}
	return time.Duration(min(max(n, 1), 60)) * time.Second
}

// streamHandler runs a server-streaming call on its decoded request.
type streamHandler[Req any] func(r *http.Request, b *box, req *Req, out *stream) error

// serverStream serves a server-streaming Connect call with JSON messages.
func serverStream[Req any](h streamHandler[Req]) boxHandler {
	return func(w http.ResponseWriter, r *http.Request, b *box) {
		w.Header().Set("Content-Type", "application/connect+json")
		out := &stream{w: w, rc: http.NewResponseController(w)}
		req, err := readEnvelope[Req](r)
		if err == nil {
			w.WriteHeader(http.StatusOK)
			err = h(r, b, req, out)
		}
		out.end(r.Context(), err)
	}
}

// readEnvelope reads the one enveloped request message of a
// server-streaming call.
func readEnvelope[Req any](r *http.Request) (*Req, error) {
	if ct := r.Header.Get("Content-Type"); !isJSON(ct, "application/connect+json") {
		return nil, &rpcError{Code: "unimplemented", Message: "Cubicle serves Connect with JSON only (Content-Type " + ct + ")"}
	}
	var hdr [5]byte
	if _, err := io.ReadFull(r.Body, hdr[:]); err != nil {
		return nil, rpcInvalid("the request has no enveloped message: %v", err)
	}
	if hdr[0]&flagCompress != 0 {
		return nil, &rpcError{Code: "unimplemented", Message: "compressed messages are not supported"}
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > maxRPCMessage {
		return nil, &rpcError{Code: "resource_exhausted", Message: "the request message is over 1 MiB"}
	}
	data := make([]byte, n)
	if _, err := io.ReadFull(r.Body, data); err != nil {
		return nil, rpcInvalid("the request message is cut short: %v", err)
	}
	// Read the body to its end: the server lifts the body's read deadline
	// there, and a server-streaming call's request holds one message.
	if rest, _ := io.Copy(io.Discard, io.LimitReader(r.Body, 1)); rest != 0 {
		return nil, rpcInvalid("a server-streaming call's request holds one message")
	}
	req := new(Req)
	if err := unmarshal(data, req); err != nil {
		return nil, err
	}
	return req, nil
}
