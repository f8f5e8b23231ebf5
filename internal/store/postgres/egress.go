package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/cubicle-sandbox/cubicle/internal/store"
)

type egress struct{ s *DB }

func (s *DB) Egress() store.Egress { return egress{s} }

// Record inserts a batch in one transaction, under lockEgress (ids become
// visible in order), sent as one round trip.
func (e egress) Record(ctx context.Context, recs []store.EgressRecord) error {
	if len(recs) == 0 {
		return nil
	}
	return e.s.tx(ctx, func(tx pgx.Tx) error {
		if err := lock(ctx, tx, lockEgress); err != nil {
			return err
		}
		b := &pgx.Batch{}
		for _, r := range recs {
			b.Queue(`INSERT INTO egress (org_id, key_id, computer_id, proto, name, addr, port,
			verdict, rule, error, sent, received, opened_at, closed_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
				r.OrgID, r.KeyID, r.ComputerID, r.Proto, r.Name, r.Addr, r.Port,
				r.Verdict, r.Rule, r.Error, r.Sent, r.Received, ms(r.OpenedAt), ms(r.ClosedAt))
		}
		return tx.SendBatch(ctx, b).Close()
	})
}

func scanEgress(row pgx.Row) (store.EgressRecord, error) {
	var r store.EgressRecord
	var opened, closed int64
	err := row.Scan(&r.ID, &r.OrgID, &r.KeyID, &r.ComputerID, &r.Proto, &r.Name, &r.Addr, &r.Port, &r.Verdict,
		&r.Rule, &r.Error, &r.Sent, &r.Received, &opened, &closed)
	r.OpenedAt, r.ClosedAt = fromMS(opened), fromMS(closed)
	return r, err
}

func (e egress) List(ctx context.Context, f store.EgressFilter) ([]store.EgressRecord, error) {
	w := window(f.OrgID, f.After, "opened_at", f.OpenedAfter, f.OpenedBefore)
	if f.ComputerID != "" {
		w.add("computer_id = ?", f.ComputerID)
	}
	if f.Host != "" {
		w.add("(name = ? OR addr = ?)", f.Host, f.Host)
	}
	limit := f.Limit
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	q := `SELECT id, org_id, key_id, computer_id, proto, name, addr, port, verdict, rule, error,
		sent, received, opened_at, closed_at FROM egress WHERE ` + w.clauses + ` ORDER BY id` + w.limit(limit)
	return list(ctx, e.s, scanEgress, q, w.args...)
}
