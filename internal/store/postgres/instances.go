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

const instanceColumns = `i.id, i.url, i.started_at, i.last_seen`

func scanInstance(r pgx.Row) (store.Instance, error) {
	var in store.Instance
	var started, seen int64
	err := r.Scan(&in.ID, &in.URL, &started, &seen)
	in.StartedAt, in.LastSeen = fromMS(started), fromMS(seen)
	return in, err
}

func (i instances) Beat(ctx context.Context, id string, at time.Time) error {
	_, err := i.s.exec(ctx, `INSERT INTO instances (id, started_at, last_seen) VALUES ($1, $2, $2)
		ON CONFLICT (id) DO UPDATE SET last_seen = excluded.last_seen`, id, ms(at))
	return err
}

func (i instances) Advertise(ctx context.Context, id, url string, at time.Time) error {
	_, err := i.s.exec(ctx, `INSERT INTO instances (id, started_at, last_seen, url) VALUES ($1, $2, $2, $3)
		ON CONFLICT (id) DO UPDATE SET last_seen = excluded.last_seen, url = excluded.url`, id, ms(at), url)
	return err
}

func (i instances) LastSeen(ctx context.Context, id string) (time.Time, error) {
	return one(ctx, i.s.pool, "instance "+id, func(r pgx.Row) (time.Time, error) {
		var v int64
		err := r.Scan(&v)
		return fromMS(v), err
	}, `SELECT last_seen FROM instances WHERE id = $1`, id)
}

func (i instances) Owner(ctx context.Context, computerID string) (store.Instance, error) {
	return one(ctx, i.s.pool, "owner of computer "+computerID, scanInstance,
		`SELECT `+instanceColumns+` FROM computers c JOIN instances i ON i.id = c.instance WHERE c.id = $1 AND c.`+alive, computerID)
}

func (i instances) OwnerByMetadata(ctx context.Context, key, value string) (string, store.Instance, error) {
	return i.owned(ctx, "owner of the computer with metadata "+key+"="+value, `SELECT c.id, `+instanceColumns+`
		FROM computers c JOIN instances i ON i.id = c.instance WHERE c.metadata::jsonb ->> $1 = $2 AND c.`+alive+` LIMIT 1`, key, value)
}

// owned reads a computer's id and its owner's columns by q.
func (i instances) owned(ctx context.Context, what, q string, args ...any) (string, store.Instance, error) {
	var id string
	in, err := one(ctx, i.s.pool, what, func(r pgx.Row) (store.Instance, error) {
		var in store.Instance
		var started, seen int64
		err := r.Scan(&id, &in.ID, &in.URL, &started, &seen)
		in.StartedAt, in.LastSeen = fromMS(started), fromMS(seen)
		return in, err
	}, q, args...)
	return id, in, err
}

func (i instances) OwnerOfKept(ctx context.Context, responseID, key string) (string, store.Instance, error) {
	return i.owned(ctx, "owner of the computer kept for response "+responseID, `SELECT c.id, `+instanceColumns+` FROM responses r
		JOIN computers c ON c.id = r.conversation::jsonb ->> $2 JOIN instances i ON i.id = c.instance
		WHERE r.id = $1 AND r.conversation IS NOT NULL AND c.`+alive, responseID, key)
}

func (i instances) OwnerOfResponse(ctx context.Context, responseID string) (store.Instance, error) {
	return one(ctx, i.s.pool, "server of response "+responseID, scanInstance,
		`SELECT `+instanceColumns+` FROM responses r JOIN instances i ON i.id = r.instance WHERE r.id = $1 AND r.instance <> ''`, responseID)
}

func (i instances) Lapsed(ctx context.Context, before time.Time) ([]store.Instance, error) {
	return list(ctx, i.s, scanInstance, `SELECT `+instanceColumns+` FROM instances i WHERE i.last_seen < $1
		AND EXISTS (SELECT 1 FROM computers c WHERE c.instance = i.id AND c.status IN ($2, $3)) ORDER BY i.id`,
		ms(before), store.StatusStarting, store.StatusReady)
}

func (i instances) Live(ctx context.Context, since time.Time) ([]store.Instance, error) {
	return list(ctx, i.s, scanInstance, `SELECT `+instanceColumns+` FROM instances i WHERE i.last_seen >= $1 ORDER BY i.id`, ms(since))
}
