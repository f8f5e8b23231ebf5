package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/cubicle-sandbox/cubicle/internal/store"
)

type scripts struct{ s *DB }

func (s *DB) Scripts() store.Scripts { return scripts{s} }

// scriptColumns are a script's columns; List reads an empty source.
const scriptColumns = `org_id, name, description, input_schema, interpreter, %s, timeout_seconds, version, key_id, created_at, updated_at`

var (
	scriptFull = fmt.Sprintf(scriptColumns, "source")
	scriptHead = fmt.Sprintf(scriptColumns, "''")
)

const oneScript = `SELECT %s FROM scripts WHERE org_id = $1 AND name = $2`

func scanScript(row pgx.Row) (store.Script, error) {
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

// Create locks the organisation's row, so creates of one organisation
// count and insert one after another and max holds.
func (s scripts) Create(ctx context.Context, sc store.Script, max int) error {
	interp, err := json.Marshal(sc.Interpreter)
	if err != nil {
		return err
	}
	return s.s.tx(ctx, func(tx pgx.Tx) error {
		var id string
		if err := tx.QueryRow(ctx, `SELECT id FROM orgs WHERE id = $1 FOR UPDATE`, sc.OrgID).Scan(&id); err != nil {
			return notFound(err, "org "+sc.OrgID)
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM scripts WHERE org_id = $1`, sc.OrgID).Scan(&n); err != nil {
			return err
		}
		if n >= max {
			return fmt.Errorf("the organisation has %d scripts: %w", n, store.ErrTooMany)
		}
		_, err := tx.Exec(ctx, `INSERT INTO scripts (`+scriptFull+`) VALUES ($1, $2, $3, $4, $5, $6, $7, 1, $8, $9, $10)`,
			sc.OrgID, sc.Name, sc.Description, string(sc.InputSchema), string(interp), sc.Source, sc.TimeoutSeconds,
			sc.KeyID, ms(sc.CreatedAt), ms(sc.UpdatedAt))
		return conflict(err, "script "+sc.Name+" exists")
	})
}

func (s scripts) Get(ctx context.Context, orgID, name string) (store.Script, error) {
	return one(ctx, s.s.pool, "script "+name, scanScript, fmt.Sprintf(oneScript, scriptFull), orgID, name)
}

func (s scripts) List(ctx context.Context, orgID string) ([]store.Script, error) {
	return list(ctx, s.s, scanScript, `SELECT `+scriptHead+` FROM scripts WHERE org_id = $1 ORDER BY name`, orgID)
}

func (s scripts) Replace(ctx context.Context, sc store.Script) (store.Script, error) {
	interp, err := json.Marshal(sc.Interpreter)
	if err != nil {
		return sc, err
	}
	return one(ctx, s.s.pool, "script "+sc.Name, scanScript, `UPDATE scripts SET description = $3, input_schema = $4,
		interpreter = $5, source = $6, timeout_seconds = $7, version = version + 1, key_id = $8, updated_at = $9
		WHERE org_id = $1 AND name = $2 RETURNING `+scriptFull,
		sc.OrgID, sc.Name, sc.Description, string(sc.InputSchema), string(interp), sc.Source, sc.TimeoutSeconds, sc.KeyID, ms(sc.UpdatedAt))
}

func (s scripts) Delete(ctx context.Context, orgID, name string) error {
	return s.s.execOne(ctx, "script "+name, `DELETE FROM scripts WHERE org_id = $1 AND name = $2`, orgID, name)
}
