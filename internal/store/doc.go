// Package store defines what Cubicle persists — organisations, keys,
// computers, usage rows and audit events — as interfaces that a SQLite
// (internal/store/sqlite) or Postgres implementation satisfies. Its error
// sentinels are classified by internal/errdefs (ErrNotFound NotFound,
// ErrFull InsufficientStorage; ErrConflict stays internal). It may import only
// internal/errdefs and the standard library.
package store
