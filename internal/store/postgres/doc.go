// Package postgres implements store.Store on PostgreSQL through
// github.com/jackc/pgx/v5 (a pool of connections), with embedded, numbered
// migrations that mirror internal/store/sqlite's one for one (same
// numbers, same tables and columns; times as Unix milliseconds, JSON as
// text), so both backends answer alike: the backend-agnostic suite
// internal/store/storetest runs against each. Errors are classified as
// SQLite's are (errors.go): no row is store.ErrNotFound, a lost race or a
// taken name store.ErrConflict, a full disk (SQLSTATE 53100)
// store.ErrFull. Rows that clients page through by id (usage, audit,
// egress) are written under a transaction-scoped advisory lock, so ids
// become visible in the order they were given (locks.go). Organisations'
// domain secrets are sealed with the key file of the server's data
// directory (internal/store/seal), never kept in the database. It may
// import internal/store, internal/store/seal, the standard library and
// pgx.
package postgres
