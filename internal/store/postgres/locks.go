package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// Advisory locks (pg_advisory_lock): the one place their keys are
// defined. Cubicle's keys live in the space of class cubicleLocks (the
// two-int form of the lock functions), so they cannot collide with an
// application sharing the database that uses the one-bigint form.
//
// Transaction-scoped locks (lock) serialize writers of one kind and are
// released at commit or rollback. Several servers share a database
// (docs/fleet.md): each computer is owned by one instance, whose lease is
// its heartbeat (the instances table); a computer's end is recorded once
// by the row lock of Computers.Stop, whichever replica records it.
const cubicleLocks = 0x43756269 // "Cubi"

// Lock keys within cubicleLocks.
const (
	// lockMigrate serializes the making of schema_migrations (whose
	// table lock then serializes the migrations of its schema).
	lockMigrate int32 = iota + 1
	// lockLedger serializes the writes of usage and audit rows, so their
	// ids (sequences, given at insert) become visible in order: a reader
	// paging by id (after=) never skips a row that commits later with a
	// smaller id. SQLite's single writer gives the same for free.
	lockLedger
	// lockEgress does the same for egress records.
	lockEgress
)

// lock takes a transaction-scoped advisory lock, waiting for it.
func lock(ctx context.Context, tx pgx.Tx, key int32) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, $2)`, int32(cubicleLocks), key)
	return err
}
