// Package store defines what Cubicle persists — organisations, keys,
// computers, usage rows and audit events — as interfaces that a SQLite
// (internal/store/sqlite) or Postgres implementation satisfies. It may
// import only the standard library.
package store
