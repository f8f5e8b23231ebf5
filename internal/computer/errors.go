package computer

import "errors"

// Error kinds, translated to HTTP once at the edge.
var (
	ErrNotFound    = errors.New("no such computer")
	ErrGone        = errors.New("the computer is already gone")
	ErrUnavailable = errors.New("the computer cannot be reached")
	ErrCapacity    = errors.New("no capacity for another computer right now")
	ErrForbidden   = errors.New("computers are not enabled for this key or organisation")
	ErrInvalid     = errors.New("invalid request")
	ErrTooLarge    = errors.New("too large")
)
