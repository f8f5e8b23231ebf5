package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/store"
)

type files struct{ db *DB }

// Files stores uploaded files' records.
func (s *DB) Files() store.Files { return files{s} }

const fileColumns = `id, org_id, key_id, filename, purpose, bytes, sha256, created_at, deleted_at`

func scanFile(row interface{ Scan(...any) error }) (store.File, error) {
	var f store.File
	var created int64
	var deleted sql.NullInt64
	err := row.Scan(&f.ID, &f.OrgID, &f.KeyID, &f.Filename, &f.Purpose, &f.Bytes, &f.SHA256, &created, &deleted)
	f.CreatedAt, f.DeletedAt = fromMS(created), fromNullMS(deleted)
	return f, err
}

func (s files) Create(ctx context.Context, f store.File) error {
	return s.db.write(func() error {
		_, err := s.db.db.ExecContext(ctx, `INSERT INTO files (`+fileColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			f.ID, f.OrgID, f.KeyID, f.Filename, f.Purpose, f.Bytes, f.SHA256, ms(f.CreatedAt), nullMS(f.DeletedAt))
		return err
	})
}

func (s files) Get(ctx context.Context, orgID, id string) (store.File, error) {
	f, err := scanFile(s.db.db.QueryRowContext(ctx, `SELECT `+fileColumns+` FROM files WHERE id = ? AND org_id = ? AND deleted_at IS NULL`, id, orgID))
	return f, notFound(err, "file "+id)
}

func (s files) List(ctx context.Context, orgID string) ([]store.File, error) {
	rows, err := s.db.db.QueryContext(ctx, `SELECT `+fileColumns+` FROM files WHERE org_id = ? AND deleted_at IS NULL ORDER BY created_at DESC, id DESC`, orgID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []store.File{}
	for rows.Next() {
		f, err := scanFile(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

func (s files) Delete(ctx context.Context, orgID, id string, at time.Time) error {
	var res sql.Result
	err := s.db.mustWrite(func() (err error) {
		res, err = s.db.db.ExecContext(ctx, `UPDATE files SET deleted_at = ? WHERE id = ? AND org_id = ? AND deleted_at IS NULL`, ms(at), id, orgID)
		return err
	})
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("file %s: %w", id, store.ErrNotFound)
	}
	return nil
}

type artifacts struct{ db *DB }

// Artifacts stores exported files' records.
func (s *DB) Artifacts() store.Artifacts { return artifacts{s} }

const artifactColumns = `id, org_id, key_id, computer_id, response_id, filename, bytes, sha256, created_at`

func scanArtifact(row interface{ Scan(...any) error }) (store.Artifact, error) {
	var a store.Artifact
	var created int64
	err := row.Scan(&a.ID, &a.OrgID, &a.KeyID, &a.ComputerID, &a.ResponseID, &a.Filename, &a.Bytes, &a.SHA256, &created)
	a.CreatedAt = fromMS(created)
	return a, err
}

func (s artifacts) Create(ctx context.Context, a store.Artifact) error {
	return s.db.write(func() error {
		_, err := s.db.db.ExecContext(ctx, `INSERT INTO artifacts (`+artifactColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			a.ID, a.OrgID, a.KeyID, a.ComputerID, a.ResponseID, a.Filename, a.Bytes, a.SHA256, ms(a.CreatedAt))
		return err
	})
}

func (s artifacts) Get(ctx context.Context, orgID, id string) (store.Artifact, error) {
	a, err := scanArtifact(s.db.db.QueryRowContext(ctx, `SELECT `+artifactColumns+` FROM artifacts WHERE id = ? AND org_id = ?`, id, orgID))
	return a, notFound(err, "artifact "+id)
}

func (s artifacts) List(ctx context.Context, f store.ArtifactFilter) ([]store.Artifact, error) {
	where, args := []string{"org_id = ?"}, []any{f.OrgID}
	if f.ComputerID != "" {
		where = append(where, "computer_id = ?")
		args = append(args, f.ComputerID)
	}
	if f.ResponseID != "" {
		where = append(where, "response_id = ?")
		args = append(args, f.ResponseID)
	}
	rows, err := s.db.db.QueryContext(ctx, `SELECT `+artifactColumns+` FROM artifacts WHERE `+strings.Join(where, " AND ")+` ORDER BY created_at DESC, id DESC`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []store.Artifact{}
	for rows.Next() {
		a, err := scanArtifact(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}
