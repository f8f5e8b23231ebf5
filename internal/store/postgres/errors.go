package postgres

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// SQLSTATEs the store classifies
// (https://www.postgresql.org/docs/15/errcodes-appendix.html).
const (
	codeUniqueViolation = "23505"
	codeDiskFull        = "53100"
)

func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

func isUniqueViolation(err error) bool { return pgCode(err) == codeUniqueViolation }

// classify maps the server's errors to the store's, as internal/store/sqlite
// does: a full disk (the database server's: disk_full) is store.ErrFull
// (HTTP 507), the local ENOSPC/EDQUOT too (store.Full); the rest is
// unchanged (a 500 should it reach a client). Unlike SQLite's, the disk is
// the database server's: there is no headroom to release, so a delete or a
// stop is refused too until its operator frees space (docs/api.md).
func classify(err error) error {
	if err == nil {
		return nil
	}
	if pgCode(err) == codeDiskFull {
		return store.FullError(err)
	}
	return store.Full(err)
}

// conflict is a unique violation as store.ErrConflict about what.
func conflict(err error, what string) error {
	if isUniqueViolation(err) {
		return fmt.Errorf("%s: %w", what, store.ErrConflict)
	}
	return err
}
