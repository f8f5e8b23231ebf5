package errhttp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
	"github.com/cubicle-sandbox/cubicle/internal/log"
)

// Sentences every transport says the same way.
const (
	// InternalSentence replaces the message of an internal error.
	InternalSentence = "internal error; see the server log"
	// ShuttingDownSentence refuses work, and ends connections, at shutdown.
	ShuttingDownSentence = "the server is shutting down"
)

// entry is a kind's status and default code.
type entry struct {
	status int
	code   string
}

// table maps each kind to HTTP, for every transport.
var table = map[errdefs.Kind]entry{
	errdefs.Unknown:             {http.StatusInternalServerError, "internal_error"},
	errdefs.Unauthenticated:     {http.StatusUnauthorized, "invalid_api_key"},
	errdefs.PermissionDenied:    {http.StatusForbidden, "forbidden"},
	errdefs.NotFound:            {http.StatusNotFound, "not_found"},
	errdefs.Conflict:            {http.StatusConflict, "conflict"},
	errdefs.ResourceExhausted:   {http.StatusTooManyRequests, "capacity_exceeded"},
	errdefs.TooLarge:            {http.StatusRequestEntityTooLarge, "too_large"},
	errdefs.Timeout:             {http.StatusRequestTimeout, "request_timeout"},
	errdefs.InvalidArgument:     {http.StatusBadRequest, "invalid_request"},
	errdefs.Unavailable:         {http.StatusServiceUnavailable, "unavailable"},
	errdefs.InsufficientStorage: {http.StatusInsufficientStorage, "insufficient_storage"},
	errdefs.BadGateway:          {http.StatusBadGateway, "upstream_error"},
	errdefs.FailedPrecondition:  {http.StatusUnprocessableEntity, "failed_precondition"},
	errdefs.MethodNotAllowed:    {http.StatusMethodNotAllowed, "method_not_allowed"},
}

// Status is the HTTP status of kind k and its default code.
func Status(k errdefs.Kind) (int, string) {
	e, ok := table[k]
	if !ok {
		e = table[errdefs.Unknown]
	}
	return e.status, e.code
}

// Of is err's HTTP status and code: its kind's status, its own code or
// else the kind's.
func Of(err error) (int, string) {
	k, code := errdefs.Of(err)
	status, def := Status(k)
	if code == "" {
		code = def
	}
	return status, code
}

// Param is an error that names the request field at fault.
type Param interface {
	error
	ErrorParam() string
}

// ParamOf is the field named by the outermost Param in err's chain, or nil.
func ParamOf(err error) *string {
	var p Param
	if errors.As(err, &p) {
		if s := p.ErrorParam(); s != "" {
			return &s
		}
	}
	return nil
}

// internal logs an internal error with ctx's logger; call it for a 500.
func internal(ctx context.Context, err error) {
	log.From(ctx).ErrorContext(ctx, "request failed", "err", err)
}

// WriteJSON answers v with status code.
func WriteJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}
