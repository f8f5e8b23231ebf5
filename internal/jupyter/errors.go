package jupyter

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// Errors of the gateway itself.
var (
	errNoKernel   = errors.New("no such kernel")
	errNoSpec     = errors.New("no such kernel spec")
	errBadRequest = errors.New("bad request")
	errClosed     = errors.New("the server is shutting down")
	errDead       = errors.New("the kernel is dead; restart it")
	errTooMany    = errors.New("too many connections")
)

// status maps an error to its HTTP status and reason, once, at the edge.
func status(err error) (int, string) {
	switch {
	case errors.Is(err, governance.ErrUnauthenticated):
		return http.StatusUnauthorized, "invalid_api_key"
	case errors.Is(err, governance.ErrForbidden), errors.Is(err, computer.ErrForbidden):
		return http.StatusForbidden, "forbidden"
	case errors.Is(err, errNoKernel), errors.Is(err, errNoSpec), errors.Is(err, computer.ErrNotFound),
		errors.Is(err, computer.ErrGone):
		return http.StatusNotFound, "not_found"
	case errors.Is(err, errDead):
		return http.StatusConflict, "kernel_dead"
	case errors.Is(err, sandbox.ErrKernelDead): // at start: usually what env asked for
		return http.StatusBadRequest, "kernel_start_failed"
	case errors.Is(err, computer.ErrCapacity), errors.Is(err, errTooMany):
		return http.StatusTooManyRequests, "capacity_exceeded"
	case errors.Is(err, errBadRequest), errors.Is(err, computer.ErrInvalid), errors.Is(err, computer.ErrTooLarge):
		return http.StatusBadRequest, "invalid_request"
	case errors.Is(err, computer.ErrUnavailable), errors.Is(err, errClosed):
		return http.StatusServiceUnavailable, "unavailable"
	}
	return http.StatusInternalServerError, "internal_error"
}

// writeError answers in jupyter_server's error shape: {"message", "reason"}.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	code, reason := status(err)
	msg := err.Error()
	if code == http.StatusInternalServerError {
		slog.ErrorContext(r.Context(), "jupyter request failed", "method", r.Method, "route", r.Pattern, "err", err)
		msg = "internal error; see the server log"
	}
	if code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `token realm="cubicle"`)
	}
	writeJSON(w, code, map[string]any{"message": msg, "reason": reason})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}
