package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/cubicle-sandbox/cubicle/internal/store"
	"github.com/cubicle-sandbox/cubicle/internal/store/seal"
)

type orgSecrets struct{ s *DB }

func (s *DB) OrgSecrets() store.OrgSecrets { return orgSecrets{s} }

// Set seals the value (internal/store/seal) and creates or replaces the
// row; replaced is told by the upsert itself (xmax is set on a row an
// ON CONFLICT updated).
func (o orgSecrets) Set(ctx context.Context, org string, sec store.OrgSecret) (bool, error) {
	var n int
	var kid *string
	if err := o.s.pool.QueryRow(ctx, `SELECT COUNT(*), MIN(key_id) FROM org_domain_secrets WHERE key_id != ''`).Scan(&n, &kid); err != nil {
		return false, classify(err)
	}
	aead, id, err := o.s.secrets.ForNew(n, deref(kid))
	if err != nil {
		return false, err
	}
	var replaced bool
	err = o.s.pool.QueryRow(ctx, `INSERT INTO org_domain_secrets (org_id, domain, name, value, key_id, created_at) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (org_id, domain, name) DO UPDATE SET value = excluded.value, key_id = excluded.key_id, created_at = excluded.created_at
		RETURNING xmax <> 0`,
		org, sec.Domain, sec.Name, seal.Seal(aead, org, sec.Domain, sec.Name, sec.Value), id, ms(sec.CreatedAt)).Scan(&replaced)
	return replaced && err == nil, classify(err)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// secretRow is a stored secret, its value still sealed.
type secretRow struct {
	store.OrgSecret
	kid string
}

// List unseals every value of the organisation's secrets.
func (o orgSecrets) List(ctx context.Context, org string) ([]store.OrgSecret, error) {
	rows, err := list(ctx, o.s, func(r pgx.Row) (secretRow, error) {
		var s secretRow
		var created int64
		err := r.Scan(&s.Domain, &s.Name, &s.Value, &s.kid, &created)
		s.CreatedAt = fromMS(created)
		return s, err
	}, `SELECT domain, name, value, key_id, created_at FROM org_domain_secrets WHERE org_id = $1 ORDER BY domain, name`, org)
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	out := make([]store.OrgSecret, len(rows))
	for i, r := range rows {
		if r.Value, err = o.s.secrets.Unseal(org, r.Domain, r.Name, r.Value, r.kid); err != nil {
			return nil, err
		}
		out[i] = r.OrgSecret
	}
	return out, nil
}

func (o orgSecrets) Names(ctx context.Context, org string) ([]store.OrgSecret, error) {
	out, err := list(ctx, o.s, func(r pgx.Row) (store.OrgSecret, error) {
		var s store.OrgSecret
		var created int64
		err := r.Scan(&s.Domain, &s.Name, &created)
		s.CreatedAt = fromMS(created)
		return s, err
	}, `SELECT domain, name, created_at FROM org_domain_secrets WHERE org_id = $1 ORDER BY domain, name`, org)
	if len(out) == 0 {
		out = nil // as SQLite's
	}
	return out, err
}

func (o orgSecrets) Delete(ctx context.Context, org, domain, name string) error {
	return o.s.execOne(ctx, "domain secret "+name+" for "+domain,
		`DELETE FROM org_domain_secrets WHERE org_id = $1 AND domain = $2 AND name = $3`, org, domain, name)
}
