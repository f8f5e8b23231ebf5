package e2b

import (
	"context"
	"net/http"

	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
	"github.com/cubicle-sandbox/cubicle/internal/errdefs/errhttp"
	"github.com/cubicle-sandbox/cubicle/internal/log"
)

// apiError is the body of an error of the E2B API and of envd's HTTP
// routes: the SDK reads code (kill: 404 is "not found") and message.
type apiError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// Errors of the E2B transport itself.
var (
	errNoRoute = errdefs.New(errdefs.NotFound, "", "no such E2B route on Cubicle (docs/e2b.md lists what is supported)")
	// errSandboxGone answers sandbox requests for a sandbox that does not
	// run (E2B's proxy answers 502 there; the SDK reads it as the
	// sandbox's end).
	errSandboxGone = errdefs.New(errdefs.BadGateway, "", "")
)

// message is what a client is told of err: its own sentence, or the
// internal sentence (the error logged) for an internal error.
func message(ctx context.Context, err error) (int, string) {
	status, _ := errhttp.Of(err)
	if status >= 500 && status != http.StatusBadGateway && status != http.StatusServiceUnavailable &&
		status != http.StatusInsufficientStorage {
		log.From(ctx).ErrorContext(ctx, "e2b request failed", "err", err)
		return status, errhttp.InternalSentence
	}
	return status, err.Error()
}

// writeError answers err in the E2B API's shape.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, msg := message(r.Context(), err)
	writeJSON(w, status, apiError{Code: status, Message: msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) { errhttp.WriteJSON(w, code, v) }
