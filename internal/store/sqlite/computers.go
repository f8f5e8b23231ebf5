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

type computers struct{ db *DB }

func (s *DB) Computers() store.Computers { return computers{s} }

const computerColumns = `id, org_id, key_id, status, created_at, ready_at, expires_at, destroyed_at, limits, metadata, response_id, instance, failure`

// alive selects computers not yet stopped.
const alive = `status NOT IN ('` + store.StatusDestroyed + `', '` + store.StatusFailed + `')`

func scanComputer(row interface{ Scan(...any) error }) (store.Computer, error) {
	var c store.Computer
	var created, expires int64
	var ready, destroyed sql.NullInt64
	var limits, meta string
	err := row.Scan(&c.ID, &c.OrgID, &c.KeyID, &c.Status, &created, &ready, &expires, &destroyed, &limits, &meta, &c.ResponseID, &c.Instance, &c.Failure)
	c.CreatedAt, c.ReadyAt, c.ExpiresAt, c.DestroyedAt = fromMS(created), fromNullMS(ready), fromMS(expires), fromNullMS(destroyed)
	c.Limits, c.Metadata = json.RawMessage(limits), json.RawMessage(meta)
	return c, err
}

func orEmpty(b json.RawMessage) string {
	if len(b) == 0 {
		return "{}"
	}
	return string(b)
}

func (c computers) Create(ctx context.Context, r store.Computer) error {
	return c.db.write(func() error {
		_, err := c.db.db.ExecContext(ctx, `INSERT INTO computers (`+computerColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.ID, r.OrgID, r.KeyID, r.Status, ms(r.CreatedAt), nullMS(r.ReadyAt), ms(r.ExpiresAt), nullMS(r.DestroyedAt),
			orEmpty(r.Limits), orEmpty(r.Metadata), r.ResponseID, r.Instance, r.Failure)
		return err
	})
}

func (c computers) MarkReady(ctx context.Context, id string, at time.Time) error {
	return c.db.write(func() error {
		_, err := c.db.db.ExecContext(ctx, `UPDATE computers SET status = ?, ready_at = ? WHERE id = ? AND status = ?`,
			store.StatusReady, ms(at), id, store.StatusStarting)
		return err
	})
}

func (c computers) SetExpiry(ctx context.Context, id string, expiresAt time.Time) error {
	return c.db.write(func() error {
		res, err := c.db.db.ExecContext(ctx, `UPDATE computers SET expires_at = ? WHERE id = ? AND `+alive,
			ms(expiresAt), id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("%w: live computer %s", store.ErrNotFound, id)
		}
		return nil
	})
}

func (c computers) Get(ctx context.Context, orgID, id string) (store.Computer, error) {
	r, err := scanComputer(c.db.db.QueryRowContext(ctx, `SELECT `+computerColumns+` FROM computers WHERE id = ? AND org_id = ?`, id, orgID))
	return r, notFound(err, "computer "+id)
}

func (c computers) List(ctx context.Context, f store.ComputerFilter) ([]store.Computer, error) {
	where, args := []string{"org_id = ?"}, []any{f.OrgID}
	if f.AliveOnly {
		where = append(where, alive)
	}
	if f.ResponseID != "" {
		where = append(where, "response_id = ?")
		args = append(args, f.ResponseID)
	}
	return c.query(ctx, `SELECT `+computerColumns+` FROM computers WHERE `+strings.Join(where, " AND ")+` ORDER BY created_at`, args...)
}

func (c computers) Alive(ctx context.Context) ([]store.Computer, error) {
	return c.query(ctx, `SELECT `+computerColumns+` FROM computers WHERE `+alive+` ORDER BY created_at`)
}

func (c computers) query(ctx context.Context, q string, args ...any) ([]store.Computer, error) {
	rows, err := c.db.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []store.Computer{}
	for rows.Next() {
		r, err := scanComputer(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Stop records a computer's end exactly once: status, usage row and
// computer.destroyed event commit together or not at all.
func (c computers) Stop(ctx context.Context, s store.Stop) error {
	return c.db.mustWrite(func() error { return c.stop(ctx, s) })
}

func (c computers) stop(ctx context.Context, s store.Stop) error {
	return c.db.tx(ctx, func(tx *sql.Tx) error {
		var orgID, keyID string
		err := tx.QueryRowContext(ctx, `SELECT org_id, key_id FROM computers WHERE id = ? AND `+alive,
			s.ComputerID).Scan(&orgID, &keyID)
		if err == sql.ErrNoRows {
			return fmt.Errorf("computer %s already stopped: %w", s.ComputerID, store.ErrConflict)
		}
		if err != nil {
			return err
		}
		status := store.StatusDestroyed
		if s.Failure != "" {
			status = store.StatusFailed
		}
		if _, err := tx.ExecContext(ctx, `UPDATE computers SET status = ?, destroyed_at = ?, failure = ? WHERE id = ?`,
			status, ms(s.At), s.Failure, s.ComputerID); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO usage (org_id, key_id, computer_id, kind, quantity, created_at) VALUES (?, ?, ?, 'sandbox_seconds', ?, ?)`,
			orgID, keyID, s.ComputerID, s.Seconds, ms(s.At)); err != nil {
			return err
		}
		event := map[string]any{"seconds": s.Seconds, "reason": s.Reason}
		if s.Failure != "" {
			event["failure"] = s.Failure
		}
		data, _ := json.Marshal(event)
		_, err = tx.ExecContext(ctx, `INSERT INTO audit (org_id, key_id, type, computer_id, data, created_at) VALUES (?, ?, 'computer.destroyed', ?, ?, ?)`,
			orgID, keyID, s.ComputerID, string(data), ms(s.At))
		return err
	})
}
