package errhttp

import (
	"context"
	"net/http"

	"github.com/cubicle-sandbox/cubicle/internal/log"
)

// Body is the error object of REST and the Responses gateway.
type Body struct {
	Type      string  `json:"type"`
	Code      string  `json:"code"`
	Message   string  `json:"message"`
	Param     *string `json:"param"`
	RequestID string  `json:"request_id,omitempty"`
}

// NewBody is the body of an error answered with status in ctx's request.
func NewBody(ctx context.Context, status int, code, message string) Body {
	return Body{Type: Type(status), Code: code, Message: message, RequestID: log.RequestID(ctx)}
}

// Type is OpenAI's error type for an HTTP status.
func Type(status int) string {
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

// OpenAI is err's status and body; message is the client's message of a
// non-internal error (an internal one is logged and replaced).
func OpenAI(ctx context.Context, err error, message string) (int, Body) {
	status, code := Of(err)
	if status == http.StatusInternalServerError {
		internal(ctx, err)
		message = InternalSentence
	}
	body := NewBody(ctx, status, code, message)
	body.Param = ParamOf(err)
	return status, body
}

// WriteOpenAI answers err as REST and the Responses gateway do:
// {"error": body}, with a Bearer challenge on a 401.
func WriteOpenAI(w http.ResponseWriter, r *http.Request, err error, message string) {
	status, body := OpenAI(r.Context(), err, message)
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="cubicle"`)
	}
	WriteJSON(w, status, map[string]any{"error": body})
}
