package responses

import (
	"fmt"

	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
)

// Error is a client-visible failure of the gateway: its kind (the HTTP
// status at the edge), an OpenAI-style code and, for a bad request, the
// field at fault.
type Error struct {
	Kind    errdefs.Kind
	Code    string
	Message string
	Param   string // empty: none
}

func (e *Error) Error() string                     { return e.Message }
func (e *Error) ErrorKind() (errdefs.Kind, string) { return e.Kind, e.Code }
func (e *Error) ErrorParam() string                { return e.Param }
func (e *Error) Is(target error) bool              { return target == e.Kind }

// NotConfiguredSentence is the message of a gateway tool this deployment or
// key cannot run.
const NotConfiguredSentence = "This tool is not configured on this deployment."

func invalid(param, format string, args ...any) error {
	return &Error{Kind: errdefs.InvalidArgument, Code: "invalid_request", Message: fmt.Sprintf(format, args...), Param: param}
}

func upstreamError(format string, args ...any) error {
	return &Error{Kind: errdefs.BadGateway, Code: "upstream_error", Message: fmt.Sprintf(format, args...)}
}
