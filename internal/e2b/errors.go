package e2b

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
	"github.com/cubicle-sandbox/cubicle/internal/errdefs/errhttp"
	"github.com/cubicle-sandbox/cubicle/internal/log"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// apiError is the body of an error of the E2B API and of envd's HTTP
// routes: the SDK reads code (kill: 404 is "not found") and message.
type apiError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// errNoRoute answers an E2B API route Cubicle does not serve.
var errNoRoute = errdefs.New(errdefs.NotFound, "", "no such E2B route on Cubicle (docs/e2b.md lists what is supported)")

// message is what a client is told of err: its own sentence, or the
// internal sentence (the error logged) for an internal error.
func message(ctx context.Context, err error) (int, string) {
	status, _ := errhttp.Of(err)
	if status >= 500 && status != http.StatusBadGateway && status != http.StatusServiceUnavailable &&
		status != http.StatusInsufficientStorage {
		log.From(ctx).ErrorContext(ctx, "e2b request failed", "err", err)
		return status, errhttp.InternalSentence
	}
	msg := err.Error()
	if errors.Is(err, sandbox.ErrNotFound) {
		// A missing file: computer.ErrNotFound's sentence is the
		// computer's, not the file's.
		msg = strings.TrimPrefix(msg, computer.ErrNotFound.Error()+": ")
	}
	return status, msg
}

// writeError answers err in the E2B API's shape.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, msg := message(r.Context(), err)
	writeJSON(w, status, apiError{Code: status, Message: msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) { errhttp.WriteJSON(w, code, v) }
