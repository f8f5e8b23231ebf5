package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cubicle-sandbox/cubicle/internal/store"
)

type volumes struct{ s *DB }

func (s *DB) Volumes() store.Volumes { return volumes{s} }

const volumeColumns = `id, org_id, key_id, name, size_mb, created_at, deleted_at`

func scanVolume(row pgx.Row) (store.Volume, error) {
	var v store.Volume
	var created int64
	var deleted *int64
	err := row.Scan(&v.ID, &v.OrgID, &v.KeyID, &v.Name, &v.SizeMB, &created, &deleted)
	v.CreatedAt, v.DeletedAt = fromMS(created), fromNullMS(deleted)
	return v, err
}

// Create records a volume; a live one of the same name (the partial
// unique index volumes_org_name) is store.ErrConflict.
func (s volumes) Create(ctx context.Context, v store.Volume) error {
	_, err := s.s.exec(ctx, `INSERT INTO volumes (`+volumeColumns+`) VALUES ($1, $2, $3, $4, $5, $6, NULL)`,
		v.ID, v.OrgID, v.KeyID, v.Name, v.SizeMB, ms(v.CreatedAt))
	return conflict(err, "volume "+v.Name+" exists")
}

const liveVolume = `SELECT ` + volumeColumns + ` FROM volumes WHERE org_id = $1 AND name = $2 AND deleted_at IS NULL`

func (s volumes) Get(ctx context.Context, orgID, name string) (store.Volume, error) {
	return one(ctx, s.s.pool, "volume "+name, scanVolume, liveVolume, orgID, name)
}

func (s volumes) List(ctx context.Context, orgID string) ([]store.Volume, error) {
	return list(ctx, s.s, scanVolume, `SELECT `+volumeColumns+` FROM volumes WHERE org_id = $1 AND deleted_at IS NULL ORDER BY name`, orgID)
}

// Delete ends a volume once: its row (locked, so a concurrent delete
// waits and then finds none), its usage (size × lifetime) and its event
// commit together.
func (s volumes) Delete(ctx context.Context, orgID, name string, at time.Time) (store.Volume, error) {
	var v store.Volume
	err := s.s.tx(ctx, func(tx pgx.Tx) error {
		var err error
		if v, err = one(ctx, tx, "volume "+name, scanVolume, liveVolume+` FOR UPDATE`, orgID, name); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE volumes SET deleted_at = $1 WHERE id = $2`, ms(at), v.ID); err != nil {
			return err
		}
		v.DeletedAt = &at
		secs := int64(0)
		if d := at.Sub(v.CreatedAt); d > 0 {
			secs = int64((d + time.Second - 1) / time.Second)
		}
		if err := lock(ctx, tx, lockLedger); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO usage (org_id, key_id, computer_id, kind, quantity, created_at) VALUES ($1, $2, $3, 'volume_mb_seconds', $4, $5)`,
			v.OrgID, v.KeyID, v.ID, secs*v.SizeMB, ms(at)); err != nil {
			return err
		}
		return insertEvent(ctx, tx, v.OrgID, v.KeyID, "volume.deleted", v.ID,
			eventData(map[string]any{"name": v.Name, "size_mb": v.SizeMB, "seconds": secs}), at)
	})
	return v, err
}
