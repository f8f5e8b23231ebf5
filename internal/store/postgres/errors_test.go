package postgres

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// TestClassify: the server's errors become the store's as SQLite's do: a
// full disk (53100) is store.ErrFull (a 507), a unique violation a
// conflict where the store says so, anything else unclassified.
func TestClassify(t *testing.T) {
	full := classify(fmt.Errorf("insert: %w", &pgconn.PgError{Code: codeDiskFull, Message: "could not extend file"}))
	if !errors.Is(full, store.ErrFull) || !errdefs.IsInsufficientStorage(full) {
		t.Fatalf("disk full: %v", full)
	}
	dup := &pgconn.PgError{Code: codeUniqueViolation}
	if err := conflict(classify(dup), "volume x exists"); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("unique violation: %v", err)
	}
	other := &pgconn.PgError{Code: "42P01"}
	if err := classify(other); err != error(other) {
		t.Fatalf("an undefined table: %v, want it unchanged", err)
	}
	if k, _ := errdefs.Of(classify(other)); k != errdefs.Unknown {
		t.Fatalf("an undefined table classified: %v", k)
	}
	if classify(nil) != nil {
		t.Fatal("nil classified")
	}
}
