// Package sqlite implements store.Store on SQLite through modernc.org/sqlite
// (pure Go), in WAL mode, with embedded, numbered migrations. It imports
// internal/store, the standard library and the driver.
package sqlite
