package httpapi

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/responses"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// apiError is the OpenAI-style error body: type (OpenAI's class of the
// status, which SDKs read as err.type), code, message and param.
type apiError struct {
	Type    string  `json:"type"`
	Code    string  `json:"code"`
	Message string  `json:"message"`
	Param   *string `json:"param"`
}

// newAPIError is the body of an error answered with status.
func newAPIError(status int, code, message string) apiError {
	return apiError{Type: errorType(status), Code: code, Message: message}
}

// errorType is OpenAI's error type for an HTTP status.
func errorType(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status == http.StatusServiceUnavailable:
		return "service_unavailable_error"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

// paramError names the request field that is wrong.
type paramError struct {
	param string
	err   error
}

func (e *paramError) Error() string { return e.err.Error() }
func (e *paramError) Unwrap() error { return e.err }

func withParam(param string, err error) error { return &paramError{param: param, err: err} }

var errTooLarge = errors.New("request body too large")

// status maps an error to its HTTP status and code, once, at the edge.
func status(err error) (int, string) {
	switch {
	case errors.Is(err, governance.ErrUnauthenticated):
		return http.StatusUnauthorized, "invalid_api_key"
	case errors.Is(err, governance.ErrForbidden), errors.Is(err, computer.ErrForbidden):
		return http.StatusForbidden, "forbidden"
	case errors.Is(err, computer.ErrNotFound), errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound, "not_found"
	case errors.Is(err, computer.ErrGone):
		return http.StatusConflict, "computer_gone"
	case errors.Is(err, computer.ErrCapacity):
		return http.StatusTooManyRequests, "capacity_exceeded"
	case errors.Is(err, computer.ErrTooLarge), errors.Is(err, errTooLarge):
		return http.StatusRequestEntityTooLarge, "too_large"
	case errors.Is(err, errBodyTimeout): // slowclients.go
		return http.StatusRequestTimeout, "request_timeout"
	case errors.Is(err, computer.ErrInvalid), errors.Is(err, governance.ErrInvalid), errors.Is(err, errBadRequest):
		return http.StatusBadRequest, "invalid_request"
	case errors.Is(err, sandbox.ErrLocked):
		return http.StatusConflict, "file_locked"
	case errors.Is(err, computer.ErrUnavailable):
		return http.StatusServiceUnavailable, "computer_unavailable"
	case errors.Is(err, store.ErrFull):
		return http.StatusInsufficientStorage, "insufficient_storage"
	}
	return http.StatusInternalServerError, "internal_error"
}

func writeError(w http.ResponseWriter, r *http.Request, err error) {
	code, body := errorBody(r, err)
	if code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="cubicle"`)
	}
	writeJSON(w, code, map[string]any{"error": body})
}

// errorBody is err's HTTP status and client-visible body; an internal
// error is logged and its message replaced.
func errorBody(r *http.Request, err error) (int, apiError) {
	var ge *responses.Error
	if errors.As(err, &ge) {
		body := newAPIError(ge.Status, ge.Code, ge.Message)
		if ge.Param != "" {
			body.Param = &ge.Param
		}
		return ge.Status, body
	}
	code, name := status(err)
	msg := clientMessage(err) // messages.go
	if code == http.StatusInternalServerError {
		// The route pattern, not the path: paths carry file names, which never go to logs.
		slog.ErrorContext(r.Context(), "request failed", "method", r.Method, "route", r.Pattern, "err", err)
		msg = "internal error; see the server log"
	}
	body := newAPIError(code, name, msg)
	var pe *paramError
	var fe *computer.FieldError
	switch {
	case errors.As(err, &pe):
		body.Param = &pe.param
	case errors.As(err, &fe):
		body.Param = &fe.Field
	}
	return code, body
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

func ptr[T any](v T) *T { return &v }
