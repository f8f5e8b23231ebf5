package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cubicle-sandbox/cubicle/internal/store"
)

type files struct{ s *DB }

// Files stores uploaded files' records.
func (s *DB) Files() store.Files { return files{s} }

const fileColumns = `id, org_id, key_id, filename, purpose, bytes, sha256, created_at, deleted_at`

func scanFile(row pgx.Row) (store.File, error) {
	var f store.File
	var created int64
	var deleted *int64
	err := row.Scan(&f.ID, &f.OrgID, &f.KeyID, &f.Filename, &f.Purpose, &f.Bytes, &f.SHA256, &created, &deleted)
	f.CreatedAt, f.DeletedAt = fromMS(created), fromNullMS(deleted)
	return f, err
}

func (s files) Create(ctx context.Context, f store.File) error {
	_, err := s.s.exec(ctx, `INSERT INTO files (`+fileColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		f.ID, f.OrgID, f.KeyID, f.Filename, f.Purpose, f.Bytes, f.SHA256, ms(f.CreatedAt), nullMS(f.DeletedAt))
	return err
}

func (s files) Get(ctx context.Context, orgID, id string) (store.File, error) {
	return one(ctx, s.s.pool, "file "+id, scanFile, `SELECT `+fileColumns+` FROM files WHERE id = $1 AND org_id = $2 AND deleted_at IS NULL`, id, orgID)
}

func (s files) List(ctx context.Context, orgID string) ([]store.File, error) {
	return list(ctx, s.s, scanFile, `SELECT `+fileColumns+` FROM files WHERE org_id = $1 AND deleted_at IS NULL ORDER BY created_at DESC, id DESC`, orgID)
}

func (s files) Delete(ctx context.Context, orgID, id string, at time.Time) error {
	return s.s.execOne(ctx, "file "+id, `UPDATE files SET deleted_at = $1 WHERE id = $2 AND org_id = $3 AND deleted_at IS NULL`, ms(at), id, orgID)
}

type artifacts struct{ s *DB }

// Artifacts stores exported files' records.
func (s *DB) Artifacts() store.Artifacts { return artifacts{s} }

const artifactColumns = `id, org_id, key_id, computer_id, response_id, filename, bytes, sha256, created_at`

func scanArtifact(row pgx.Row) (store.Artifact, error) {
	var a store.Artifact
	var created int64
	err := row.Scan(&a.ID, &a.OrgID, &a.KeyID, &a.ComputerID, &a.ResponseID, &a.Filename, &a.Bytes, &a.SHA256, &created)
	a.CreatedAt = fromMS(created)
	return a, err
}

func (s artifacts) Create(ctx context.Context, a store.Artifact) error {
	_, err := s.s.exec(ctx, `INSERT INTO artifacts (`+artifactColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		a.ID, a.OrgID, a.KeyID, a.ComputerID, a.ResponseID, a.Filename, a.Bytes, a.SHA256, ms(a.CreatedAt))
	return err
}

func (s artifacts) Get(ctx context.Context, orgID, id string) (store.Artifact, error) {
	return one(ctx, s.s.pool, "artifact "+id, scanArtifact, `SELECT `+artifactColumns+` FROM artifacts WHERE id = $1 AND org_id = $2`, id, orgID)
}

func (s artifacts) List(ctx context.Context, f store.ArtifactFilter) ([]store.Artifact, error) {
	return list(ctx, s.s, scanArtifact, `SELECT `+artifactColumns+` FROM artifacts
		WHERE org_id = $1 AND ($2 = '' OR computer_id = $2) AND ($3 = '' OR response_id = $3) ORDER BY created_at DESC, id DESC`,
		f.OrgID, f.ComputerID, f.ResponseID)
}
