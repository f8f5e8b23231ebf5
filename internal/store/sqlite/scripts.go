package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/cubicle-sandbox/cubicle/internal/store"
)

type scripts struct{ db *DB }

func (s *DB) Scripts() store.Scripts { return scripts{s} }

// scriptColumns are a script's columns; List reads an empty source.
const scriptColumns = `org_id, name, description, input_schema, interpreter, %s, timeout_seconds, version, key_id, created_at, updated_at`

var (
	scriptFull = fmt.Sprintf(scriptColumns, "source")
	scriptHead = fmt.Sprintf(scriptColumns, "''")
)

func scanScript(row interface{ Scan(...any) error }) (store.Script, error) {
	var sc store.Script
	var schema, interp string
	var created, updated int64
	err := row.Scan(&sc.OrgID, &sc.Name, &sc.Description, &schema, &interp, &sc.Source, &sc.TimeoutSeconds,
		&sc.Version, &sc.KeyID, &created, &updated)
	if err != nil {
		return sc, err
	}
	sc.InputSchema, sc.CreatedAt, sc.UpdatedAt = json.RawMessage(schema), fromMS(created), fromMS(updated)
	return sc, json.Unmarshal([]byte(interp), &sc.Interpreter)
}

// Create counts the organisation's scripts and inserts in one write
// transaction (SQLite serializes writers), so max holds.
func (s scripts) Create(ctx context.Context, sc store.Script, max int) error {
	interp, err := json.Marshal(sc.Interpreter)
	if err != nil {
		return err
	}
	return s.db.write(func() error {
		return s.db.tx(ctx, func(tx *sql.Tx) error {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM scripts WHERE org_id = ?`, sc.OrgID).Scan(&n); err != nil {
				return err
			}
			if n >= max {
				return fmt.Errorf("the organisation has %d scripts: %w", n, store.ErrTooMany)
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO scripts (`+scriptFull+`) VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?)`,
				sc.OrgID, sc.Name, sc.Description, string(sc.InputSchema), string(interp), sc.Source, sc.TimeoutSeconds,
				sc.KeyID, ms(sc.CreatedAt), ms(sc.UpdatedAt))
			if err != nil && strings.Contains(err.Error(), "UNIQUE") {
				return fmt.Errorf("script %s exists: %w", sc.Name, store.ErrConflict)
			}
			return err
		})
	})
}

func (s scripts) Get(ctx context.Context, orgID, name string) (store.Script, error) {
	sc, err := scanScript(s.db.db.QueryRowContext(ctx, `SELECT `+scriptFull+` FROM scripts WHERE org_id = ? AND name = ?`, orgID, name))
	return sc, notFound(err, "script "+name)
}

func (s scripts) List(ctx context.Context, orgID string) ([]store.Script, error) {
	rows, err := s.db.db.QueryContext(ctx, `SELECT `+scriptHead+` FROM scripts WHERE org_id = ? ORDER BY name`, orgID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []store.Script{}
	for rows.Next() {
		sc, err := scanScript(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, sc)
	}
	return out, rows.Err()
}

func (s scripts) Replace(ctx context.Context, sc store.Script) (store.Script, error) {
	interp, err := json.Marshal(sc.Interpreter)
	if err != nil {
		return sc, err
	}
	var out store.Script
	err = s.db.write(func() error {
		return s.db.tx(ctx, func(tx *sql.Tx) error {
			res, err := tx.ExecContext(ctx, `UPDATE scripts SET description = ?, input_schema = ?, interpreter = ?, source = ?,
				timeout_seconds = ?, version = version + 1, key_id = ?, updated_at = ? WHERE org_id = ? AND name = ?`,
				sc.Description, string(sc.InputSchema), string(interp), sc.Source, sc.TimeoutSeconds, sc.KeyID,
				ms(sc.UpdatedAt), sc.OrgID, sc.Name)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 0 {
				return fmt.Errorf("script %s: %w", sc.Name, store.ErrNotFound)
			}
			out, err = scanScript(tx.QueryRowContext(ctx, `SELECT `+scriptFull+` FROM scripts WHERE org_id = ? AND name = ?`, sc.OrgID, sc.Name))
			return err
		})
	})
	return out, err
}

func (s scripts) Delete(ctx context.Context, orgID, name string) error {
	return s.db.mustWrite(func() error {
		res, err := s.db.db.ExecContext(ctx, `DELETE FROM scripts WHERE org_id = ? AND name = ?`, orgID, name)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("script %s: %w", name, store.ErrNotFound)
		}
		return nil
	})
}
