// Package errdefs is the one error model of the service: a small set of
// kinds (not found, invalid argument, conflict...) that the service layers
// attach to their errors, and that each transport translates once, at its
// edge (internal/errdefs/errhttp holds the HTTP table and renderers).
//
// A kind is attached by wrapping: New(kind, code, message) makes a
// sentinel and Wrap(kind, code, err) classifies an existing error, both
// keeping the message unchanged, so the packages keep their sentinels
// (computer.ErrNotFound, store.ErrFull...) and their errors.Is callers.
// The optional code is the finer, client-visible name of a failure within
// its kind ("computer_gone" and "file_locked" are both conflicts). A Kind
// is itself an error value: errors.Is(err, errdefs.NotFound) and the Is*
// helpers see a kind anywhere in a %w chain.
//
// When a chain holds several kinds, the first in the order of the Kind
// constants wins (an unauthenticated call is 401 before anything else).
// Any error type may classify itself by implementing Classified.
//
// It may import only the standard library and builds on every platform.
package errdefs
