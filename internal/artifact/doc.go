// Package artifact names a stored artifact (Ref): the one shape internal/files
// stores and returns, internal/tools puts in a tool's result, and the
// computer service adds to python cells, so none of them imports another
// for it. It may import only internal/errdefs (ErrTooLarge is TooLarge) and the
// standard library.
package artifact
