package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/store"
)

type volumes struct{ db *DB }

func (s *DB) Volumes() store.Volumes { return volumes{s} }

const volumeColumns = `id, org_id, key_id, name, size_mb, created_at, deleted_at`

func scanVolume(row interface{ Scan(...any) error }) (store.Volume, error) {
	var v store.Volume
	var created int64
	var deleted sql.NullInt64
	err := row.Scan(&v.ID, &v.OrgID, &v.KeyID, &v.Name, &v.SizeMB, &created, &deleted)
	v.CreatedAt, v.DeletedAt = fromMS(created), fromNullMS(deleted)
	return v, err
}

func (s volumes) Create(ctx context.Context, v store.Volume) error {
	return s.db.write(func() error {
		_, err := s.db.db.ExecContext(ctx, `INSERT INTO volumes (`+volumeColumns+`) VALUES (?, ?, ?, ?, ?, ?, NULL)`,
			v.ID, v.OrgID, v.KeyID, v.Name, v.SizeMB, ms(v.CreatedAt))
		if err != nil && strings.Contains(err.Error(), "UNIQUE") {
			return fmt.Errorf("volume %s exists: %w", v.Name, store.ErrConflict)
		}
		return err
	})
}

func (s volumes) Get(ctx context.Context, orgID, name string) (store.Volume, error) {
	v, err := scanVolume(s.db.db.QueryRowContext(ctx, `SELECT `+volumeColumns+` FROM volumes WHERE org_id = ? AND name = ? AND deleted_at IS NULL`, orgID, name))
	return v, notFound(err, "volume "+name)
}

func (s volumes) List(ctx context.Context, orgID string) ([]store.Volume, error) {
	rows, err := s.db.db.QueryContext(ctx, `SELECT `+volumeColumns+` FROM volumes WHERE org_id = ? AND deleted_at IS NULL ORDER BY name`, orgID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []store.Volume{}
	for rows.Next() {
		v, err := scanVolume(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// Delete ends a volume once: its row, its usage (size × lifetime) and its
// event commit together.
func (s volumes) Delete(ctx context.Context, orgID, name string, at time.Time) (store.Volume, error) {
	var v store.Volume
	err := s.db.mustWrite(func() error {
		return s.db.tx(ctx, func(tx *sql.Tx) error {
			var err error
			v, err = scanVolume(tx.QueryRowContext(ctx, `SELECT `+volumeColumns+` FROM volumes WHERE org_id = ? AND name = ? AND deleted_at IS NULL`, orgID, name))
			if err != nil {
				return notFound(err, "volume "+name)
			}
			if _, err := tx.ExecContext(ctx, `UPDATE volumes SET deleted_at = ? WHERE id = ?`, ms(at), v.ID); err != nil {
				return err
			}
			v.DeletedAt = &at
			secs := int64(0)
			if d := at.Sub(v.CreatedAt); d > 0 {
				secs = int64((d + time.Second - 1) / time.Second)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO usage (org_id, key_id, computer_id, kind, quantity, created_at) VALUES (?, ?, ?, 'volume_mb_seconds', ?, ?)`,
				v.OrgID, v.KeyID, v.ID, secs*v.SizeMB, ms(at)); err != nil {
				return err
			}
			data, _ := json.Marshal(map[string]any{"name": v.Name, "size_mb": v.SizeMB, "seconds": secs})
			_, err = tx.ExecContext(ctx, `INSERT INTO audit (org_id, key_id, type, computer_id, data, created_at) VALUES (?, ?, 'volume.deleted', ?, ?, ?)`,
				v.OrgID, v.KeyID, v.ID, string(data), ms(at))
			return err
		})
	})
	return v, err
}
