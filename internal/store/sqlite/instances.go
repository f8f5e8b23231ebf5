package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/store"
)

type instances struct {
	db *sql.DB
	s  *DB
}

// Instances returns the instance heartbeats.
func (s *DB) Instances() store.Instances { return instances{s.db, s} }

func (i instances) Beat(ctx context.Context, id string, at time.Time) error {
	return i.s.write(func() error {
		_, err := i.db.ExecContext(ctx, `INSERT INTO instances (id, started_at, last_seen) VALUES (?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET last_seen = excluded.last_seen`, id, ms(at), ms(at))
		return err
	})
}

func (i instances) LastSeen(ctx context.Context, id string) (time.Time, error) {
	var v int64
	err := i.db.QueryRowContext(ctx, `SELECT last_seen FROM instances WHERE id = ?`, id).Scan(&v)
	return fromMS(v), notFound(err, "instance "+id)
}
