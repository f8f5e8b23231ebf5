package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cubicle-sandbox/cubicle/internal/store"
)

type instances struct{ s *DB }

// Instances returns the instance heartbeats.
func (s *DB) Instances() store.Instances { return instances{s} }

func (i instances) Beat(ctx context.Context, id string, at time.Time) error {
	_, err := i.s.exec(ctx, `INSERT INTO instances (id, started_at, last_seen) VALUES ($1, $2, $2)
		ON CONFLICT (id) DO UPDATE SET last_seen = excluded.last_seen`, id, ms(at))
	return err
}

func (i instances) LastSeen(ctx context.Context, id string) (time.Time, error) {
	return one(ctx, i.s.pool, "instance "+id, func(r pgx.Row) (time.Time, error) {
		var v int64
		err := r.Scan(&v)
		return fromMS(v), err
	}, `SELECT last_seen FROM instances WHERE id = $1`, id)
}
