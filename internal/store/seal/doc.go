// Package seal seals organisations' domain secrets at rest for every
// store backend (internal/store/sqlite, internal/store/postgres): AES-256-GCM
// with a key kept in a file of the server's data directory (KeyFile),
// never in the database, so a copy of the database alone (a backup, a
// dump, read access to the table) holds no usable value. It may import
// internal/store and the standard library.
package seal
