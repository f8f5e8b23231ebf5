package postgres

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cubicle-sandbox/cubicle/internal/store"
)

type orgs struct{ s *DB }
type keys struct{ s *DB }

func (s *DB) Orgs() store.Orgs { return orgs{s} }
func (s *DB) Keys() store.Keys { return keys{s} }

const orgColumns = `id, name, allow_computer, computer_internet, computer_internet_bulk_rows, policy, created_at`

// emptyPolicy is a policy that restricts nothing, as stored.
const emptyPolicy = `{"settings":{}}`

// policyText is a policy as stored (empty: emptyPolicy).
func policyText(p []byte) string {
	if len(p) == 0 {
		return emptyPolicy
	}
	return string(p)
}

func scanOrg(row pgx.Row) (store.Org, error) {
	var org store.Org
	var created int64
	var policy string
	err := row.Scan(&org.ID, &org.Name, &org.AllowComputer, &org.ComputerInternet, &org.ComputerInternetBulkRows, &policy, &created)
	org.Policy, org.CreatedAt = []byte(policy), fromMS(created)
	return org, err
}

func (o orgs) Create(ctx context.Context, org store.Org) error {
	_, err := o.s.exec(ctx, `INSERT INTO orgs (`+orgColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		org.ID, org.Name, org.AllowComputer, org.ComputerInternet, org.ComputerInternetBulkRows, policyText(org.Policy), ms(org.CreatedAt))
	return err
}

func (o orgs) Get(ctx context.Context, id string) (store.Org, error) {
	return one(ctx, o.s.pool, "org "+id, scanOrg, `SELECT `+orgColumns+` FROM orgs WHERE id = $1`, id)
}

func (o orgs) Update(ctx context.Context, org store.Org) error {
	return o.s.execOne(ctx, "org "+org.ID, `UPDATE orgs SET allow_computer = $1, computer_internet = $2, computer_internet_bulk_rows = $3, policy = $4 WHERE id = $5`,
		org.AllowComputer, org.ComputerInternet, org.ComputerInternetBulkRows, policyText(org.Policy), org.ID)
}

func (o orgs) List(ctx context.Context) ([]store.Org, error) {
	out, err := list(ctx, o.s, scanOrg, `SELECT `+orgColumns+` FROM orgs ORDER BY created_at`)
	if len(out) == 0 {
		out = nil // as SQLite's: no organisation is nil
	}
	return out, err
}

func (o orgs) Count(ctx context.Context) (int, error) {
	var n int
	err := o.s.pool.QueryRow(ctx, `SELECT COUNT(*) FROM orgs`).Scan(&n)
	return n, classify(err)
}

const keyColumns = `id, org_id, name, hash, prefix, admin, capabilities, policy, created_at, revoked_at`

func scanKey(row pgx.Row) (store.Key, error) {
	var k store.Key
	var caps, policy string
	var created int64
	var revoked *int64
	err := row.Scan(&k.ID, &k.OrgID, &k.Name, &k.Hash, &k.Prefix, &k.Admin, &caps, &policy, &created, &revoked)
	k.Capabilities, k.Policy, k.CreatedAt, k.RevokedAt = []byte(caps), []byte(policy), fromMS(created), fromNullMS(revoked)
	return k, err
}

func (k keys) Create(ctx context.Context, key store.Key) error {
	_, err := k.s.exec(ctx, `INSERT INTO keys (`+keyColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		key.ID, key.OrgID, key.Name, key.Hash, key.Prefix, key.Admin, orEmpty(key.Capabilities), policyText(key.Policy),
		ms(key.CreatedAt), nullMS(key.RevokedAt))
	return err
}

func (k keys) Get(ctx context.Context, id string) (store.Key, error) {
	return one(ctx, k.s.pool, "key "+id, scanKey, `SELECT `+keyColumns+` FROM keys WHERE id = $1`, id)
}

func (k keys) ByHash(ctx context.Context, hash string) (store.Key, error) {
	return one(ctx, k.s.pool, "key", scanKey, `SELECT `+keyColumns+` FROM keys WHERE hash = $1`, hash)
}

func (k keys) List(ctx context.Context, orgID string) ([]store.Key, error) {
	out, err := list(ctx, k.s, scanKey, `SELECT `+keyColumns+` FROM keys WHERE $1 = '' OR org_id = $1 ORDER BY created_at`, orgID)
	if len(out) == 0 {
		out = nil // as SQLite's
	}
	return out, err
}

func (k keys) Revoke(ctx context.Context, id string, at time.Time) error {
	return k.s.execOne(ctx, "key "+id, `UPDATE keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL`, ms(at), id)
}

func (k keys) SetPolicy(ctx context.Context, id string, policy json.RawMessage) error {
	return k.s.execOne(ctx, "key "+id, `UPDATE keys SET policy = $1 WHERE id = $2`, policyText(policy), id)
}
