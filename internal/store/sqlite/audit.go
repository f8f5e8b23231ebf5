package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"strings"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/store"
)

type usage struct{ db *sql.DB }
type audit struct {
	db *sql.DB
	s  *DB
}

func (s *DB) Usage() store.Usage { return usage{s.db} }
func (s *DB) Audit() store.Audit { return audit{s.db, s} }

func (u usage) List(ctx context.Context, f store.UsageFilter) ([]store.UsageRow, error) {
	where, args := timeRange("org_id = ? AND id > ?", []any{f.OrgID, f.After}, f.Since, f.Until)
	args = append(args, store.PageLimit(f.Limit))
	rows, err := u.db.QueryContext(ctx, `SELECT id, org_id, key_id, computer_id, kind, quantity, created_at FROM usage WHERE `+where+` ORDER BY id LIMIT ?`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []store.UsageRow{}
	for rows.Next() {
		var r store.UsageRow
		var created int64
		if err := rows.Scan(&r.ID, &r.OrgID, &r.KeyID, &r.ComputerID, &r.Kind, &r.Quantity, &created); err != nil {
			return nil, err
		}
		r.CreatedAt = fromMS(created)
		out = append(out, r)
	}
	return out, rows.Err()
}

func timeRange(where string, args []any, since, until time.Time) (string, []any) {
	clauses := []string{where}
	if !since.IsZero() {
		clauses = append(clauses, "created_at >= ?")
		args = append(args, ms(since))
	}
	if !until.IsZero() {
		clauses = append(clauses, "created_at < ?")
		args = append(args, ms(until))
	}
	return strings.Join(clauses, " AND "), args
}

func (a audit) Record(ctx context.Context, e store.Event) error {
	data := string(e.Data)
	if data == "" {
		data = "{}"
	}
	return a.s.mustWrite(func() error {
		_, err := a.db.ExecContext(ctx, `INSERT INTO audit (org_id, key_id, type, computer_id, data, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
			e.OrgID, e.KeyID, e.Type, e.ComputerID, data, ms(e.CreatedAt))
		return err
	})
}

func (a audit) List(ctx context.Context, f store.EventFilter) ([]store.Event, error) {
	where, args := timeRange("org_id = ? AND id > ?", []any{f.OrgID, f.After}, f.Since, f.Until)
	if f.Type != "" {
		where += " AND type = ?"
		args = append(args, f.Type)
	}
	args = append(args, store.PageLimit(f.Limit))
	rows, err := a.db.QueryContext(ctx, `SELECT id, org_id, key_id, type, computer_id, data, created_at FROM audit WHERE `+where+` ORDER BY id LIMIT ?`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []store.Event{}
	for rows.Next() {
		var e store.Event
		var data string
		var created int64
		if err := rows.Scan(&e.ID, &e.OrgID, &e.KeyID, &e.Type, &e.ComputerID, &data, &created); err != nil {
			return nil, err
		}
		e.Data, e.CreatedAt = json.RawMessage(data), fromMS(created)
		out = append(out, e)
	}
	return out, rows.Err()
}
