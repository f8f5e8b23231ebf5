package sqlite

import (
	"context"
	"database/sql"

	"github.com/cubicle-sandbox/cubicle/internal/store"
)

type orgSecrets struct {
	db *sql.DB
	s  *DB
}

func (s *DB) OrgSecrets() store.OrgSecrets { return orgSecrets{s.db, s} }

func (o orgSecrets) Set(ctx context.Context, org string, sec store.OrgSecret) error {
	return o.s.write(func() error {
		_, err := o.db.ExecContext(ctx, `INSERT INTO org_domain_secrets (org_id, domain, name, value, created_at) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (org_id, domain, name) DO UPDATE SET value = excluded.value, created_at = excluded.created_at`,
			org, sec.Domain, sec.Name, sec.Value, ms(sec.CreatedAt))
		return err
	})
}

func (o orgSecrets) List(ctx context.Context, org string) ([]store.OrgSecret, error) {
	rows, err := o.db.QueryContext(ctx, `SELECT domain, name, value, created_at FROM org_domain_secrets WHERE org_id = ? ORDER BY domain, name`, org)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.OrgSecret
	for rows.Next() {
		var s store.OrgSecret
		var created int64
		if err := rows.Scan(&s.Domain, &s.Name, &s.Value, &created); err != nil {
			return nil, err
		}
		s.CreatedAt = fromMS(created)
		out = append(out, s)
	}
	return out, rows.Err()
}

func (o orgSecrets) Delete(ctx context.Context, org, domain, name string) error {
	return o.s.write(func() error {
		res, err := o.db.ExecContext(ctx, `DELETE FROM org_domain_secrets WHERE org_id = ? AND domain = ? AND name = ?`, org, domain, name)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return notFound(sql.ErrNoRows, "domain secret "+name+" for "+domain)
		}
		return nil
	})
}
