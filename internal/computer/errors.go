package computer

import (
	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

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
	// ErrNoInternet refuses a network policy the deployment, the
	// organisation or the key does not allow (403, as ErrForbidden).
	ErrNoInternet = errdefs.New(errdefs.PermissionDenied, "", "the internet is not allowed")
	ErrInvalid    = errdefs.New(errdefs.InvalidArgument, "", "invalid request")
	ErrTooLarge   = errdefs.New(errdefs.TooLarge, "", "too large")
	// ErrCursor: a list's page asked after a computer it does not hold.
	ErrCursor = errdefs.New(errdefs.InvalidArgument, "", "no such computer to list after")
)

// ErrorParam names the request field at fault, for the edge.
func (e *FieldError) ErrorParam() string { return e.Field }

// lacks is the error for a part the driver does not have: hostErr, or,
// for a driver that lacks it by design (sandbox.Named), a 422
// unsupported_by_driver naming it ("the kubernetes driver " + what).
func (m *Manager) lacks(hostErr error, what string) error {
	if n, ok := m.driver.(sandbox.Named); ok {
		return errdefs.New(errdefs.FailedPrecondition, "unsupported_by_driver", "the "+n.DriverName()+" driver "+what)
	}
	return hostErr
}
