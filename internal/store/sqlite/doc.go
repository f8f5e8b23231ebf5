// Package sqlite implements store.Store on SQLite through modernc.org/sqlite
// (pure Go), in WAL mode, with embedded, numbered migrations, keeping a
// preallocated headroom file for the writes a full disk must not stop
// (headroom.go). A full disk is store.ErrFull. Its behaviour is pinned by
// the backend-agnostic suite internal/store/storetest, which
// internal/store/postgres runs too. It may import internal/store,
// internal/store/seal, internal/log, the standard library and the driver.
package sqlite
