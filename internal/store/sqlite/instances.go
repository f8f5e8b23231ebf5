package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/store"
)

type instances struct {
	db *sql.DB
	s  *DB
}

// Instances returns the instance heartbeats.
func (s *DB) Instances() store.Instances { return instances{s.db, s} }

const instanceColumns = `i.id, i.url, i.started_at, i.last_seen`

func scanInstance(r interface{ Scan(...any) error }) (store.Instance, error) {
	var in store.Instance
	var started, seen int64
	err := r.Scan(&in.ID, &in.URL, &started, &seen)
	in.StartedAt, in.LastSeen = fromMS(started), fromMS(seen)
	return in, err
}

func (i instances) Beat(ctx context.Context, id string, at time.Time) error {
	return i.s.write(func() error {
		_, err := i.db.ExecContext(ctx, `INSERT INTO instances (id, started_at, last_seen) VALUES (?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET last_seen = excluded.last_seen`, id, ms(at), ms(at))
		return err
	})
}

func (i instances) Advertise(ctx context.Context, id, url string, at time.Time) error {
	return i.s.write(func() error {
		_, err := i.db.ExecContext(ctx, `INSERT INTO instances (id, started_at, last_seen, url) VALUES (?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET last_seen = excluded.last_seen, url = excluded.url`, id, ms(at), ms(at), url)
		return err
	})
}

func (i instances) LastSeen(ctx context.Context, id string) (time.Time, error) {
	var v int64
	err := i.db.QueryRowContext(ctx, `SELECT last_seen FROM instances WHERE id = ?`, id).Scan(&v)
	return fromMS(v), notFound(err, "instance "+id)
}

func (i instances) Owner(ctx context.Context, computerID string) (store.Instance, error) {
	in, err := scanInstance(i.db.QueryRowContext(ctx, `SELECT `+instanceColumns+` FROM computers c
		JOIN instances i ON i.id = c.instance WHERE c.id = ? AND c.`+alive, computerID))
	return in, notFound(err, "owner of computer "+computerID)
}

func (i instances) OwnerByMetadata(ctx context.Context, key, value string) (string, store.Instance, error) {
	return scanOwned(i.db.QueryRowContext(ctx, `SELECT c.id, `+instanceColumns+` FROM computers c
		JOIN instances i ON i.id = c.instance WHERE json_extract(c.metadata, ?) = ? AND c.`+alive+` LIMIT 1`,
		metadataPath(key), value), "owner of the computer with metadata "+key+"="+value)
}

// scanOwned reads a computer's id and its owner's columns.
func scanOwned(row *sql.Row, what string) (string, store.Instance, error) {
	var id string
	var in store.Instance
	var started, seen int64
	err := row.Scan(&id, &in.ID, &in.URL, &started, &seen)
	in.StartedAt, in.LastSeen = fromMS(started), fromMS(seen)
	return id, in, notFound(err, what)
}

// metadataPath is the JSON path of a metadata key, quoted so that any key
// names one member.
func metadataPath(key string) string {
	b, _ := json.Marshal(key)
	return "$." + string(b)
}

func (i instances) OwnerOfKept(ctx context.Context, responseID, key string) (string, store.Instance, error) {
	return scanOwned(i.db.QueryRowContext(ctx, `SELECT c.id, `+instanceColumns+` FROM responses r
		JOIN computers c ON c.id = json_extract(r.conversation, ?) JOIN instances i ON i.id = c.instance
		WHERE r.id = ? AND r.conversation IS NOT NULL AND c.`+alive, metadataPath(key), responseID),
		"owner of the computer kept for response "+responseID)
}

func (i instances) OwnerOfResponse(ctx context.Context, responseID string) (store.Instance, error) {
	in, err := scanInstance(i.db.QueryRowContext(ctx, `SELECT `+instanceColumns+` FROM responses r
		JOIN instances i ON i.id = r.instance WHERE r.id = ? AND r.instance <> ''`, responseID))
	return in, notFound(err, "server of response "+responseID)
}

func (i instances) Lapsed(ctx context.Context, before time.Time) ([]store.Instance, error) {
	return i.list(ctx, `SELECT `+instanceColumns+` FROM instances i WHERE i.last_seen < ?
		AND EXISTS (SELECT 1 FROM computers c WHERE c.instance = i.id AND c.status IN (?, ?)) ORDER BY i.id`,
		ms(before), store.StatusStarting, store.StatusReady)
}

func (i instances) Live(ctx context.Context, since time.Time) ([]store.Instance, error) {
	return i.list(ctx, `SELECT `+instanceColumns+` FROM instances i WHERE i.last_seen >= ? ORDER BY i.id`, ms(since))
}

func (i instances) list(ctx context.Context, q string, args ...any) ([]store.Instance, error) {
	rows, err := i.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []store.Instance{}
	for rows.Next() {
		in, err := scanInstance(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, in)
	}
	return out, rows.Err()
}
