// Package sqlite implements store.Store on SQLite through modernc.org/sqlite
// (pure Go), in WAL mode, with embedded, numbered migrations, keeping a
// preallocated headroom file for the writes a full disk must not stop
// (headroom.go). A full disk is store.ErrFull. It may import
// internal/store, internal/log, the standard library and the driver.
package sqlite
