package httpapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
	"github.com/cubicle-sandbox/cubicle/internal/errdefs/errhttp"
	"github.com/cubicle-sandbox/cubicle/internal/log"
)

// paramError names the request field that is wrong.
type paramError struct {
	param string
	err   error
}

func (e *paramError) Error() string      { return e.err.Error() }
func (e *paramError) Unwrap() error      { return e.err }
func (e *paramError) ErrorParam() string { return e.param }

func withParam(param string, err error) error { return &paramError{param: param, err: err} }

// Errors of the transport itself.
var (
	errTooLarge   = errdefs.New(errdefs.TooLarge, "", "request body too large")
	errBadRequest = errdefs.New(errdefs.InvalidArgument, "", "bad request")
	errNotFound   = errdefs.New(errdefs.NotFound, "", "not found")
	// errBodyTimeout: the client stopped sending its request body (slowclients.go).
	errBodyTimeout = errdefs.New(errdefs.Timeout, "", "request timeout: the client sent no byte of the request body for too long")
	errNoGateway   = errdefs.New(errdefs.Unavailable, "gateway_not_configured",
		"The Responses gateway is not configured on this deployment: no upstream is configured ([gateway] upstream_url or [[gateway.upstreams]]).")
)

func writeError(w http.ResponseWriter, r *http.Request, err error) {
	errhttp.WriteOpenAI(w, r, err, clientMessage(err)) // messages.go
}

// errorBody is err's HTTP status and client-visible body; an internal
// error is logged and its message replaced.
func errorBody(r *http.Request, err error) (int, errhttp.Body) {
	return errhttp.OpenAI(r.Context(), err, clientMessage(err))
}

// streamError is the error object of an SSE error event after the stream
// started: err's own message, whatever its kind.
func streamError(ctx context.Context, err error) errhttp.Body {
	code, name := errhttp.Of(err)
	return errhttp.NewBody(ctx, code, name, err.Error())
}

// streamFailed logs the error that ended a streamed response when it is
// internal; a client's error, a cancellation and the gateway's own errors
// (sent in response.failed) are not.
func streamFailed(ctx context.Context, err error, msg string) {
	if err == nil || errors.Is(err, context.Canceled) {
		return
	}
	if k, _ := errdefs.Of(err); k == errdefs.Unknown {
		log.From(ctx).ErrorContext(ctx, msg, "err", err)
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) { errhttp.WriteJSON(w, code, v) }
