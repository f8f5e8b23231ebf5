package store

import (
	"errors"
	"syscall"

	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
)

// ErrFull means the server's own disk (the data directory's filesystem)
// is full, so what was asked cannot be stored: HTTP 507
// insufficient_storage. Deleting never fails for it (see docs/api.md).
var ErrFull = errdefs.New(errdefs.InsufficientStorage, "", "insufficient storage: the server's disk is full")

// fullError is ErrFull with what could not be stored and its cause, which
// stays out of the message (it names host paths).
type fullError struct {
	what  string
	cause error
}

func (e fullError) Error() string {
	msg := ErrFull.Error()
	if e.what != "" {
		msg += ": " + e.what
	}
	return msg + "; delete files or computers you no longer need, or ask the operator to free space on the server, then retry"
}

func (e fullError) Unwrap() []error { return []error{ErrFull, e.cause} }

// Full returns err as ErrFull when it says the disk is full (ENOSPC,
// EDQUOT), else err unchanged.
func Full(err error) error { return FullFor("", err) }

// FullFor is Full, saying in the message what could not be stored.
func FullFor(what string, err error) error {
	if err == nil || errors.Is(err, ErrFull) {
		return err
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fullError{what: what, cause: err}
	}
	return err
}

// FullError wraps cause, known to be a full disk, as ErrFull.
func FullError(cause error) error { return fullError{cause: cause} }
