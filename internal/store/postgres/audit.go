package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cubicle-sandbox/cubicle/internal/store"
)

type usage struct{ s *DB }
type audit struct{ s *DB }

func (s *DB) Usage() store.Usage { return usage{s} }
func (s *DB) Audit() store.Audit { return audit{s} }

// where is a list's conditions and arguments, numbered as they are added.
type where struct {
	clauses string
	args    []any
}

// add appends a condition whose parameters are written ? (numbered $n
// here), one per argument, in order.
func (w *where) add(cond string, args ...any) {
	var b strings.Builder
	for _, c := range cond {
		if c == '?' && len(args) > 0 {
			w.args = append(w.args, args[0])
			args = args[1:]
			fmt.Fprintf(&b, "$%d", len(w.args))
			continue
		}
		b.WriteRune(c)
	}
	if w.clauses != "" {
		w.clauses += " AND "
	}
	w.clauses += b.String()
}

// window is org_id, id > after and created_at in [since, until) (zero:
// unbounded) over column at.
func window(orgID string, after int64, at string, since, until time.Time) *where {
	w := &where{}
	w.add("org_id = ?", orgID)
	w.add("id > ?", after)
	if !since.IsZero() {
		w.add(at+" >= ?", ms(since))
	}
	if !until.IsZero() {
		w.add(at+" < ?", ms(until))
	}
	return w
}

// limit ends the query with its row limit.
func (w *where) limit(n int) string {
	w.args = append(w.args, n)
	return fmt.Sprintf(" LIMIT $%d", len(w.args))
}

func scanUsage(row pgx.Row) (store.UsageRow, error) {
	var r store.UsageRow
	var created int64
	err := row.Scan(&r.ID, &r.OrgID, &r.KeyID, &r.ComputerID, &r.Kind, &r.Quantity, &created)
	r.CreatedAt = fromMS(created)
	return r, err
}

func (u usage) List(ctx context.Context, f store.UsageFilter) ([]store.UsageRow, error) {
	w := window(f.OrgID, f.After, "created_at", f.Since, f.Until)
	q := `SELECT id, org_id, key_id, computer_id, kind, quantity, created_at FROM usage WHERE ` + w.clauses + ` ORDER BY id` + w.limit(store.PageLimit(f.Limit))
	return list(ctx, u.s, scanUsage, q, w.args...)
}

func (a audit) Record(ctx context.Context, e store.Event) error {
	data := string(e.Data)
	if data == "" {
		data = "{}"
	}
	return a.s.tx(ctx, func(tx pgx.Tx) error {
		if err := lock(ctx, tx, lockLedger); err != nil {
			return err
		}
		return insertEvent(ctx, tx, e.OrgID, e.KeyID, e.Type, e.ComputerID, data, e.CreatedAt)
	})
}

func scanEvent(row pgx.Row) (store.Event, error) {
	var e store.Event
	var data string
	var created int64
	err := row.Scan(&e.ID, &e.OrgID, &e.KeyID, &e.Type, &e.ComputerID, &data, &created)
	e.Data, e.CreatedAt = json.RawMessage(data), fromMS(created)
	return e, err
}

func (a audit) List(ctx context.Context, f store.EventFilter) ([]store.Event, error) {
	w := window(f.OrgID, f.After, "created_at", f.Since, f.Until)
	if f.Type != "" {
		w.add("type = ?", f.Type)
	}
	q := `SELECT id, org_id, key_id, type, computer_id, data, created_at FROM audit WHERE ` + w.clauses + ` ORDER BY id` + w.limit(store.PageLimit(f.Limit))
	return list(ctx, a.s, scanEvent, q, w.args...)
}
