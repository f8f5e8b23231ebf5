package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cubicle-sandbox/cubicle/internal/store"
)

type computers struct{ s *DB }

func (s *DB) Computers() store.Computers { return computers{s} }

const computerColumns = `id, org_id, key_id, status, created_at, ready_at, expires_at, destroyed_at, limits, metadata, response_id, instance, failure, pauses, paused_at`

// alive selects computers not yet stopped.
const alive = `status NOT IN ('` + store.StatusDestroyed + `', '` + store.StatusFailed + `')`

func scanComputer(row pgx.Row) (store.Computer, error) {
	var c store.Computer
	var created, expires int64
	var ready, destroyed, paused *int64
	var limits, meta string
	err := row.Scan(&c.ID, &c.OrgID, &c.KeyID, &c.Status, &created, &ready, &expires, &destroyed, &limits, &meta, &c.ResponseID, &c.Instance, &c.Failure, &c.Pauses, &paused)
	c.CreatedAt, c.ReadyAt, c.ExpiresAt, c.DestroyedAt = fromMS(created), fromNullMS(ready), fromMS(expires), fromNullMS(destroyed)
	c.PausedAt = fromNullMS(paused)
	c.Limits, c.Metadata = json.RawMessage(limits), json.RawMessage(meta)
	return c, err
}

func (c computers) Create(ctx context.Context, r store.Computer) error {
	_, err := c.s.exec(ctx, `INSERT INTO computers (`+computerColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)`,
		r.ID, r.OrgID, r.KeyID, r.Status, ms(r.CreatedAt), nullMS(r.ReadyAt), ms(r.ExpiresAt), nullMS(r.DestroyedAt),
		orEmpty(r.Limits), orEmpty(r.Metadata), r.ResponseID, r.Instance, r.Failure, r.Pauses, nullMS(r.PausedAt))
	return err
}

func (c computers) MarkReady(ctx context.Context, id string, at time.Time) error {
	_, err := c.s.exec(ctx, `UPDATE computers SET status = $1, ready_at = $2 WHERE id = $3 AND status = $4`,
		store.StatusReady, ms(at), id, store.StatusStarting)
	return err
}

func (c computers) SetExpiry(ctx context.Context, id string, expiresAt time.Time) error {
	n, err := c.s.exec(ctx, `UPDATE computers SET expires_at = $1 WHERE id = $2 AND `+alive, ms(expiresAt), id)
	if err == nil && n == 0 {
		return fmt.Errorf("%w: live computer %s", store.ErrNotFound, id)
	}
	return err
}

func (c computers) Get(ctx context.Context, orgID, id string) (store.Computer, error) {
	return one(ctx, c.s.pool, "computer "+id, scanComputer, `SELECT `+computerColumns+` FROM computers WHERE id = $1 AND org_id = $2`, id, orgID)
}

func (c computers) List(ctx context.Context, f store.ComputerFilter) ([]store.Computer, error) {
	w := &where{}
	w.add("org_id = ?", f.OrgID)
	if f.ResponseID != "" {
		w.add("response_id = ?", f.ResponseID)
	}
	if f.AliveOnly {
		w.add(alive)
	}
	cmp, dir := ">", "ASC"
	if f.Desc {
		cmp, dir = "<", "DESC"
	}
	if f.After != "" {
		at := &where{clauses: w.clauses, args: slices.Clone(w.args)}
		at.add("id = ?", f.After)
		created, err := one(ctx, c.s.pool, "computer "+f.After, func(r pgx.Row) (int64, error) {
			var v int64
			return v, r.Scan(&v)
		}, `SELECT created_at FROM computers WHERE `+at.clauses, at.args...)
		if err != nil {
			return nil, err
		}
		w.add("(created_at, id) "+cmp+" (?, ?)", created, f.After)
	}
	q := `SELECT ` + computerColumns + ` FROM computers WHERE ` + w.clauses + ` ORDER BY created_at ` + dir + `, id ` + dir
	if f.Limit > 0 {
		q += w.limit(f.Limit)
	}
	return list(ctx, c.s, scanComputer, q, w.args...)
}

func (c computers) Alive(ctx context.Context) ([]store.Computer, error) {
	return list(ctx, c.s, scanComputer, `SELECT `+computerColumns+` FROM computers WHERE `+alive+` ORDER BY created_at, id`)
}

// owner is what a stop or a pause reads of its computer, locked.
type owner struct {
	orgID, keyID, status string
	period               int
}

// lockComputer reads and locks (FOR UPDATE) the computer id if it matches
// cond; a concurrent stop or pause waits for the first to commit, then
// sees its result (read committed re-checks cond on the new row), so the
// rows are written exactly once. None: store.ErrConflict saying why.
func lockComputer(ctx context.Context, tx pgx.Tx, id, cond, why string, args ...any) (owner, error) {
	var o owner
	err := tx.QueryRow(ctx, `SELECT org_id, key_id, status, pauses FROM computers WHERE id = $1 AND `+cond+` FOR UPDATE`,
		append([]any{id}, args...)...).Scan(&o.orgID, &o.keyID, &o.status, &o.period)
	if errors.Is(err, pgx.ErrNoRows) {
		return o, fmt.Errorf("computer %s %s: %w", id, why, store.ErrConflict)
	}
	return o, err
}

// Stop records a computer's end exactly once: status, usage row and
// computer.destroyed event commit together or not at all.
func (c computers) Stop(ctx context.Context, s store.Stop) error {
	return c.s.tx(ctx, func(tx pgx.Tx) error {
		o, err := lockComputer(ctx, tx, s.ComputerID, alive, "already stopped")
		if err != nil {
			return err
		}
		status := store.StatusDestroyed
		if s.Failure != "" {
			status = store.StatusFailed
		}
		if _, err := tx.Exec(ctx, `UPDATE computers SET status = $1, destroyed_at = $2, failure = $3 WHERE id = $4`,
			status, ms(s.At), s.Failure, s.ComputerID); err != nil {
			return err
		}
		if err := lock(ctx, tx, lockLedger); err != nil {
			return err
		}
		if o.status == store.StatusPaused {
			s.Seconds = 0 // charged up to the pause
		} else if err := insertUsage(ctx, tx, o, s); err != nil {
			return err
		}
		event := map[string]any{"seconds": s.Seconds, "reason": s.Reason}
		if s.Failure != "" {
			event["failure"] = s.Failure
		}
		return insertEvent(ctx, tx, o.orgID, o.keyID, "computer.destroyed", s.ComputerID, eventData(event), s.At)
	})
}

// insertUsage writes the sandbox_seconds row of a computer's running
// period (0 before its first pause), under lockLedger.
func insertUsage(ctx context.Context, tx pgx.Tx, o owner, s store.Stop) error {
	_, err := tx.Exec(ctx, `INSERT INTO usage (org_id, key_id, computer_id, kind, quantity, created_at, period) VALUES ($1, $2, $3, 'sandbox_seconds', $4, $5, $6)`,
		o.orgID, o.keyID, s.ComputerID, s.Seconds, ms(s.At), o.period)
	return err
}

// insertEvent writes an audit event (data: its JSON), under lockLedger.
func insertEvent(ctx context.Context, tx pgx.Tx, orgID, keyID, typ, computerID, data string, at time.Time) error {
	_, err := tx.Exec(ctx, `INSERT INTO audit (org_id, key_id, type, computer_id, data, created_at) VALUES ($1, $2, $3, $4, $5, $6)`,
		orgID, keyID, typ, computerID, data, ms(at))
	return err
}

// eventData is an event's data as JSON.
func eventData(v map[string]any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// Pause records a ready computer's pause once: status, the usage row of
// the period that ended and the computer.paused event.
func (c computers) Pause(ctx context.Context, s store.Stop) error {
	return c.s.tx(ctx, func(tx pgx.Tx) error {
		o, err := lockComputer(ctx, tx, s.ComputerID, `status = $2`, "is not running", store.StatusReady)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE computers SET status = $1, paused_at = $2, pauses = pauses + 1 WHERE id = $3`,
			store.StatusPaused, ms(s.At), s.ComputerID); err != nil {
			return err
		}
		if err := lock(ctx, tx, lockLedger); err != nil {
			return err
		}
		if err := insertUsage(ctx, tx, o, s); err != nil {
			return err
		}
		return insertEvent(ctx, tx, o.orgID, o.keyID, "computer.paused", s.ComputerID, eventData(map[string]any{"seconds": s.Seconds, "reason": s.Reason}), s.At)
	})
}

func (c computers) Resume(ctx context.Context, id string, at time.Time, instance string, expiresAt time.Time) error {
	n, err := c.s.exec(ctx, `UPDATE computers SET status = $1, ready_at = $2, paused_at = NULL, instance = $3, expires_at = $4 WHERE id = $5 AND status = $6`,
		store.StatusReady, ms(at), instance, ms(expiresAt), id, store.StatusPaused)
	if err == nil && n == 0 {
		return fmt.Errorf("computer %s is not paused: %w", id, store.ErrConflict)
	}
	return err
}
