package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Advisory locks (pg_advisory_lock): the one place their keys are
// defined. Cubicle's keys live in the space of class cubicleLocks (the
// two-int form of the lock functions), so they cannot collide with an
// application sharing the database that uses the one-bigint form.
//
// Transaction-scoped locks (lock) serialize writers of one kind and are
// released at commit or rollback. A session lock (Exclusive) is held by a
// connection taken out of the pool for as long as its holder lives, and
// released when that connection ends (the holder's process dies or its
// connection breaks). Leases for several replicas (one owner per computer,
// the reaper and pool refill acting once) belong here: a session lock per
// job, or a leases table with expiry renewed by the owner's heartbeat
// (docs/ARCHITECTURE.md, "State").
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
	// lockServer is held by the one 'cubicle serve' of a database.
	lockServer
)

// lock takes a transaction-scoped advisory lock, waiting for it.
func lock(ctx context.Context, tx pgx.Tx, key int32) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, $2)`, int32(cubicleLocks), key)
	return err
}

// ErrLocked is returned by Exclusive when another server holds the
// database.
var ErrLocked = errors.New("the database is in use by another cubicle serve")

// Exclusive takes the database for this server alone (a session lock on a
// connection kept out of the pool): a second server on the same database
// would recover the first one's live computers as stopped, until several
// replicas are supported (issue 18). release drops it; so does the end of
// the process.
func (s *DB) Exclusive(ctx context.Context) (release func(), err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, classify(err)
	}
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, $2)`, int32(cubicleLocks), lockServer).Scan(&ok); err != nil {
		conn.Release()
		return nil, classify(err)
	}
	if !ok {
		conn.Release()
		return nil, fmt.Errorf("%w; stop it, or give this server a database of its own (store.url)", ErrLocked)
	}
	return func() { unlockAndRelease(conn) }, nil
}

// unlockAndRelease drops the server lock and gives the connection back;
// should the unlock fail, the connection is closed (which drops it too).
func unlockAndRelease(conn *pgxpool.Conn) {
	if _, err := conn.Exec(context.Background(), `SELECT pg_advisory_unlock($1, $2)`, int32(cubicleLocks), lockServer); err != nil {
		conn.Conn().Close(context.Background())
	}
	conn.Release()
}
