package responses

import "fmt"

// Error is a client-visible failure with its HTTP status, an OpenAI-style
// code and, for a bad request, the field at fault.
type Error struct {
	Status  int
	Code    string
	Message string
	Param   string // empty: none
}

func (e *Error) Error() string { return e.Message }

// NotConfiguredSentence is the message of a gateway tool this deployment or
// key cannot run.
const NotConfiguredSentence = "This tool is not configured on this deployment."

func invalid(param, format string, args ...any) error {
	return &Error{Status: 400, Code: "invalid_request", Message: fmt.Sprintf(format, args...), Param: param}
}

func upstreamError(format string, args ...any) error {
	return &Error{Status: 502, Code: "upstream_error", Message: fmt.Sprintf(format, args...)}
}
