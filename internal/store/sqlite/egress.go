package sqlite

import (
	"context"
	"strings"

	"github.com/cubicle-sandbox/cubicle/internal/store"
)

type egress struct{ s *DB }

func (s *DB) Egress() store.Egress { return egress{s} }

// Record inserts a batch in one transaction (an ordinary write: a full disk
// refuses it, and the caller counts what it could not keep).
func (e egress) Record(ctx context.Context, recs []store.EgressRecord) error {
	if len(recs) == 0 {
		return nil
	}
	return e.s.write(func() error {
		tx, err := e.s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		stmt, err := tx.PrepareContext(ctx, `INSERT INTO egress (org_id, key_id, computer_id, proto, name, addr, port,
			verdict, rule, error, sent, received, opened_at, closed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		defer stmt.Close()
		for _, r := range recs {
			if _, err := stmt.ExecContext(ctx, r.OrgID, r.KeyID, r.ComputerID, r.Proto, r.Name, r.Addr, r.Port,
				r.Verdict, r.Rule, r.Error, r.Sent, r.Received, ms(r.OpenedAt), ms(r.ClosedAt)); err != nil {
				return err
			}
		}
		return tx.Commit()
	})
}

func (e egress) List(ctx context.Context, f store.EgressFilter) ([]store.EgressRecord, error) {
	clauses, args := []string{"org_id = ?", "id > ?"}, []any{f.OrgID, f.After}
	if f.ComputerID != "" {
		clauses, args = append(clauses, "computer_id = ?"), append(args, f.ComputerID)
	}
	if f.Host != "" {
		clauses, args = append(clauses, "(name = ? OR addr = ?)"), append(args, f.Host, f.Host)
	}
	if !f.OpenedAfter.IsZero() {
		clauses, args = append(clauses, "opened_at >= ?"), append(args, ms(f.OpenedAfter))
	}
	if !f.OpenedBefore.IsZero() {
		clauses, args = append(clauses, "opened_at < ?"), append(args, ms(f.OpenedBefore))
	}
	limit := f.Limit
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	args = append(args, limit)
	rows, err := e.s.db.QueryContext(ctx, `SELECT id, org_id, key_id, computer_id, proto, name, addr, port, verdict, rule, error,
		sent, received, opened_at, closed_at FROM egress WHERE `+strings.Join(clauses, " AND ")+` ORDER BY id LIMIT ?`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []store.EgressRecord{}
	for rows.Next() {
		var r store.EgressRecord
		var opened, closed int64
		if err := rows.Scan(&r.ID, &r.OrgID, &r.KeyID, &r.ComputerID, &r.Proto, &r.Name, &r.Addr, &r.Port, &r.Verdict,
			&r.Rule, &r.Error, &r.Sent, &r.Received, &opened, &closed); err != nil {
			return nil, err
		}
		r.OpenedAt, r.ClosedAt = fromMS(opened), fromMS(closed)
		out = append(out, r)
	}
	return out, rows.Err()
}
