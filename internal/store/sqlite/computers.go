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

const computerColumns = `id, org_id, key_id, status, created_at, ready_at, expires_at, destroyed_at, limits, metadata, response_id, instance, failure, pauses, paused_at`

// alive selects computers not yet stopped.
const alive = `status NOT IN ('` + store.StatusDestroyed + `', '` + store.StatusFailed + `')`

func scanComputer(row interface{ Scan(...any) error }) (store.Computer, error) {
	var c store.Computer
	var created, expires int64
	var ready, destroyed, paused sql.NullInt64
	var limits, meta string
	err := row.Scan(&c.ID, &c.OrgID, &c.KeyID, &c.Status, &created, &ready, &expires, &destroyed, &limits, &meta, &c.ResponseID, &c.Instance, &c.Failure, &c.Pauses, &paused)
	c.CreatedAt, c.ReadyAt, c.ExpiresAt, c.DestroyedAt = fromMS(created), fromNullMS(ready), fromMS(expires), fromNullMS(destroyed)
	c.PausedAt = fromNullMS(paused)
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
		_, err := c.db.db.ExecContext(ctx, `INSERT INTO computers (`+computerColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.ID, r.OrgID, r.KeyID, r.Status, ms(r.CreatedAt), nullMS(r.ReadyAt), ms(r.ExpiresAt), nullMS(r.DestroyedAt),
			orEmpty(r.Limits), orEmpty(r.Metadata), r.ResponseID, r.Instance, r.Failure, r.Pauses, nullMS(r.PausedAt))
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
	cmp, dir := ">", "ASC"
	if f.Desc {
		cmp, dir = "<", "DESC"
	}
	if f.After != "" {
		var created int64
		err := c.db.db.QueryRowContext(ctx, `SELECT created_at FROM computers WHERE id = ? AND `+strings.Join(where, " AND "),
			append([]any{f.After}, args...)...).Scan(&created)
		if err != nil {
			return nil, notFound(err, "computer "+f.After)
		}
		where = append(where, "(created_at, id) "+cmp+" (?, ?)")
		args = append(args, created, f.After)
	}
	q := `SELECT ` + computerColumns + ` FROM computers WHERE ` + strings.Join(where, " AND ") + ` ORDER BY created_at ` + dir + `, id ` + dir
	if f.Limit > 0 {
		q += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	return c.query(ctx, q, args...)
}

func (c computers) Alive(ctx context.Context) ([]store.Computer, error) {
	return c.query(ctx, `SELECT `+computerColumns+` FROM computers WHERE `+alive+` ORDER BY created_at, id`)
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
		var orgID, keyID, was string
		var period int
		err := tx.QueryRowContext(ctx, `SELECT org_id, key_id, status, pauses FROM computers WHERE id = ? AND `+alive,
			s.ComputerID).Scan(&orgID, &keyID, &was, &period)
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
		if was == store.StatusPaused {
			s.Seconds = 0 // charged up to the pause
		} else if err := insertUsage(ctx, tx, orgID, keyID, s, period); err != nil {
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

// insertUsage writes the sandbox_seconds row of a computer's running
// period (0 before its first pause).
func insertUsage(ctx context.Context, tx *sql.Tx, orgID, keyID string, s store.Stop, period int) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO usage (org_id, key_id, computer_id, kind, quantity, created_at, period) VALUES (?, ?, ?, 'sandbox_seconds', ?, ?, ?)`,
		orgID, keyID, s.ComputerID, s.Seconds, ms(s.At), period)
	return err
}

// Pause records a ready computer's pause once: status, the usage row of
// the period that ended and the computer.paused event.
func (c computers) Pause(ctx context.Context, s store.Stop) error {
	return c.db.mustWrite(func() error {
		return c.db.tx(ctx, func(tx *sql.Tx) error {
			var orgID, keyID string
			var period int
			err := tx.QueryRowContext(ctx, `SELECT org_id, key_id, pauses FROM computers WHERE id = ? AND status = ?`,
				s.ComputerID, store.StatusReady).Scan(&orgID, &keyID, &period)
			if err == sql.ErrNoRows {
				return fmt.Errorf("computer %s is not running: %w", s.ComputerID, store.ErrConflict)
			}
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE computers SET status = ?, paused_at = ?, pauses = pauses + 1 WHERE id = ?`,
				store.StatusPaused, ms(s.At), s.ComputerID); err != nil {
				return err
			}
			if err := insertUsage(ctx, tx, orgID, keyID, s, period); err != nil {
				return err
			}
			data, _ := json.Marshal(map[string]any{"seconds": s.Seconds, "reason": s.Reason})
			_, err = tx.ExecContext(ctx, `INSERT INTO audit (org_id, key_id, type, computer_id, data, created_at) VALUES (?, ?, 'computer.paused', ?, ?, ?)`,
				orgID, keyID, s.ComputerID, string(data), ms(s.At))
			return err
		})
	})
}

func (c computers) Resume(ctx context.Context, id string, at time.Time, instance string, expiresAt time.Time) error {
	return c.db.write(func() error {
		res, err := c.db.db.ExecContext(ctx, `UPDATE computers SET status = ?, ready_at = ?, paused_at = NULL, instance = ?, expires_at = ? WHERE id = ? AND status = ?`,
			store.StatusReady, ms(at), instance, ms(expiresAt), id, store.StatusPaused)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("computer %s is not paused: %w", id, store.ErrConflict)
		}
		return nil
	})
}
