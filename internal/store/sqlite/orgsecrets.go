package sqlite

import (
	"context"
	"database/sql"

	"github.com/cubicle-sandbox/cubicle/internal/store"
	"github.com/cubicle-sandbox/cubicle/internal/store/seal"
)

type orgSecrets struct {
	db *sql.DB
	s  *DB
}

func (s *DB) OrgSecrets() store.OrgSecrets { return orgSecrets{s.db, s} }

// Set seals the value (sealed.go) and creates or replaces the row.
func (o orgSecrets) Set(ctx context.Context, org string, sec store.OrgSecret) (bool, error) {
	aead, kid, err := o.s.sealKey(ctx)
	if err != nil {
		return false, err
	}
	value := seal.Seal(aead, org, sec.Domain, sec.Name, sec.Value)
	var replaced bool
	err = o.s.write(func() error {
		return o.s.tx(ctx, func(tx *sql.Tx) error {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM org_domain_secrets WHERE org_id = ? AND domain = ? AND name = ?`,
				org, sec.Domain, sec.Name).Scan(&n); err != nil {
				return err
			}
			replaced = n > 0
			_, err := tx.ExecContext(ctx, `INSERT INTO org_domain_secrets (org_id, domain, name, value, key_id, created_at) VALUES (?, ?, ?, ?, ?, ?)
				ON CONFLICT (org_id, domain, name) DO UPDATE SET value = excluded.value, key_id = excluded.key_id, created_at = excluded.created_at`,
				org, sec.Domain, sec.Name, value, kid, ms(sec.CreatedAt))
			return err
		})
	})
	return replaced && err == nil, err
}

// List unseals every value of the organisation's secrets.
func (o orgSecrets) List(ctx context.Context, org string) ([]store.OrgSecret, error) {
	rows, err := o.db.QueryContext(ctx, `SELECT domain, name, value, key_id, created_at FROM org_domain_secrets WHERE org_id = ? ORDER BY domain, name`, org)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.OrgSecret
	for rows.Next() {
		var s store.OrgSecret
		var sealed, kid string
		var created int64
		if err := rows.Scan(&s.Domain, &s.Name, &sealed, &kid, &created); err != nil {
			return nil, err
		}
		if s.Value, err = o.s.secrets.Unseal(org, s.Domain, s.Name, sealed, kid); err != nil {
			return nil, err
		}
		s.CreatedAt = fromMS(created)
		out = append(out, s)
	}
	return out, rows.Err()
}

func (o orgSecrets) Names(ctx context.Context, org string) ([]store.OrgSecret, error) {
	rows, err := o.db.QueryContext(ctx, `SELECT domain, name, created_at FROM org_domain_secrets WHERE org_id = ? ORDER BY domain, name`, org)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.OrgSecret
	for rows.Next() {
		var s store.OrgSecret
		var created int64
		if err := rows.Scan(&s.Domain, &s.Name, &created); err != nil {
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
