package errdefs

import "errors"

// Kind is a class of failure. The constants are in order of precedence:
// in a chain that holds several kinds, the first one listed wins.
type Kind uint8

const (
	Unknown             Kind = iota // unclassified: an internal error
	Unauthenticated                 // missing or wrong credentials
	PermissionDenied                // the caller may not do that
	NotFound                        // no such resource
	Conflict                        // the resource's state forbids it (gone, locked, dead)
	ResourceExhausted               // no capacity right now
	TooLarge                        // a body, file or value over its bound
	Timeout                         // the client was too slow
	InvalidArgument                 // the request is wrong
	Unavailable                     // a dependency cannot be reached right now
	InsufficientStorage             // the server's disk is full
	BadGateway                      // the upstream server failed
	FailedPrecondition              // valid, but not in this context (a computer tool outside a turn)
	MethodNotAllowed                // the resource exists, the method does not
)

var names = [...]string{
	Unknown:             "internal error",
	Unauthenticated:     "unauthenticated",
	PermissionDenied:    "permission denied",
	NotFound:            "not found",
	Conflict:            "conflict",
	ResourceExhausted:   "resource exhausted",
	TooLarge:            "too large",
	Timeout:             "timeout",
	InvalidArgument:     "invalid argument",
	Unavailable:         "unavailable",
	InsufficientStorage: "insufficient storage",
	BadGateway:          "bad gateway",
	FailedPrecondition:  "failed precondition",
	MethodNotAllowed:    "method not allowed",
}

// Error makes a Kind a target for errors.Is.
func (k Kind) Error() string {
	if int(k) < len(names) {
		return names[k]
	}
	return names[Unknown]
}

// Classified is an error that names its kind and code (code may be empty).
type Classified interface {
	error
	ErrorKind() (Kind, string)
}

type classified struct {
	kind Kind
	code string
	err  error
}

func (e *classified) Error() string             { return e.err.Error() }
func (e *classified) Unwrap() error             { return e.err }
func (e *classified) ErrorKind() (Kind, string) { return e.kind, e.code }
func (e *classified) Is(target error) bool {
	k, ok := target.(Kind)
	return ok && k == e.kind
}

// New is an error of kind k with message msg and code (empty: the kind's
// default code at the edge).
func New(k Kind, code, msg string) error {
	return &classified{kind: k, code: code, err: errors.New(msg)}
}

// Wrap classifies err as k with code, keeping its message; nil stays nil.
func Wrap(k Kind, code string, err error) error {
	if err == nil {
		return nil
	}
	return &classified{kind: k, code: code, err: err}
}

// Of is the kind and code of err: those of the classification of highest
// precedence in its chain, or Unknown.
func Of(err error) (Kind, string) {
	kind, code := Unknown, ""
	walk(err, func(c Classified) {
		k, cd := c.ErrorKind()
		if k != Unknown && (kind == Unknown || k < kind) {
			kind, code = k, cd
		}
	})
	return kind, code
}

// walk calls f for every Classified error in err's tree, depth first.
func walk(err error, f func(Classified)) {
	for err != nil {
		if c, ok := err.(Classified); ok {
			f(c)
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e, f)
			}
			return
		default:
			return
		}
	}
}

// IsNotFound reports a NotFound anywhere in err's chain; so do the others.
func IsNotFound(err error) bool            { return errors.Is(err, NotFound) }
func IsInvalidArgument(err error) bool     { return errors.Is(err, InvalidArgument) }
func IsConflict(err error) bool            { return errors.Is(err, Conflict) }
func IsPermissionDenied(err error) bool    { return errors.Is(err, PermissionDenied) }
func IsUnauthenticated(err error) bool     { return errors.Is(err, Unauthenticated) }
func IsResourceExhausted(err error) bool   { return errors.Is(err, ResourceExhausted) }
func IsTooLarge(err error) bool            { return errors.Is(err, TooLarge) }
func IsTimeout(err error) bool             { return errors.Is(err, Timeout) }
func IsUnavailable(err error) bool         { return errors.Is(err, Unavailable) }
func IsInsufficientStorage(err error) bool { return errors.Is(err, InsufficientStorage) }
