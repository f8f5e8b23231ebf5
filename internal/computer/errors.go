package computer

import "github.com/cubicle-sandbox/cubicle/internal/errdefs"

// Error kinds of the service, classified by errdefs (the edge's statuses)
// and compared with errors.Is.
var (
	ErrNotFound = errdefs.New(errdefs.NotFound, "", "no such computer")
	// ErrTemplateNotFound: GET /v1/templates/{name} of no template.
	ErrTemplateNotFound = errdefs.New(errdefs.NotFound, "", "no such template")
	ErrGone             = errdefs.New(errdefs.Conflict, "computer_gone", "the computer is already gone")
	ErrUnavailable      = errdefs.New(errdefs.Unavailable, "computer_unavailable", "the computer cannot be reached")
	ErrCapacity         = errdefs.New(errdefs.ResourceExhausted, "", "no capacity for another computer right now")
	ErrForbidden        = errdefs.New(errdefs.PermissionDenied, "", "computers are not enabled for this key or organisation")
	ErrInvalid          = errdefs.New(errdefs.InvalidArgument, "", "invalid request")
	ErrTooLarge         = errdefs.New(errdefs.TooLarge, "", "too large")
)

// ErrorParam names the request field at fault, for the edge.
func (e *FieldError) ErrorParam() string { return e.Field }
