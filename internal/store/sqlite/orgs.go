package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/store"
)

type orgs struct {
	db *sql.DB
	s  *DB
}
type keys struct {
	db *sql.DB
	s  *DB
}

func (s *DB) Orgs() store.Orgs { return orgs{s.db, s} }
func (s *DB) Keys() store.Keys { return keys{s.db, s} }

func (o orgs) Create(ctx context.Context, org store.Org) error {
	return o.s.write(func() error {
		_, err := o.db.ExecContext(ctx, `INSERT INTO orgs (id, name, allow_computer, computer_internet, computer_internet_bulk_rows, policy, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			org.ID, org.Name, boolInt(org.AllowComputer), boolInt(org.ComputerInternet), boolInt(org.ComputerInternetBulkRows), policyText(org.Policy), ms(org.CreatedAt))
		return err
	})
}

func (o orgs) Get(ctx context.Context, id string) (store.Org, error) {
	var org store.Org
	var created int64
	var allow, internet, bulk int
	var policy string
	err := o.db.QueryRowContext(ctx, `SELECT id, name, allow_computer, computer_internet, computer_internet_bulk_rows, policy, created_at FROM orgs WHERE id = ?`, id).
		Scan(&org.ID, &org.Name, &allow, &internet, &bulk, &policy, &created)
	org.AllowComputer, org.ComputerInternet, org.Policy, org.CreatedAt = allow != 0, internet != 0, []byte(policy), fromMS(created)
	org.ComputerInternetBulkRows = bulk != 0
	return org, notFound(err, "org "+id)
}

func (o orgs) Update(ctx context.Context, org store.Org) error {
	return o.s.write(func() error {
		res, err := o.db.ExecContext(ctx, `UPDATE orgs SET allow_computer = ?, computer_internet = ?, computer_internet_bulk_rows = ?, policy = ? WHERE id = ?`,
			boolInt(org.AllowComputer), boolInt(org.ComputerInternet), boolInt(org.ComputerInternetBulkRows), policyText(org.Policy), org.ID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return notFound(sql.ErrNoRows, "org "+org.ID)
		}
		return nil
	})
}

func (o orgs) List(ctx context.Context) ([]store.Org, error) {
	rows, err := o.db.QueryContext(ctx, `SELECT id, name, allow_computer, computer_internet, computer_internet_bulk_rows, policy, created_at FROM orgs ORDER BY created_at`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Org
	for rows.Next() {
		var org store.Org
		var created int64
		var allow, internet, bulk int
		var policy string
		if err := rows.Scan(&org.ID, &org.Name, &allow, &internet, &bulk, &policy, &created); err != nil {
			return nil, err
		}
		org.AllowComputer, org.ComputerInternet, org.Policy, org.CreatedAt = allow != 0, internet != 0, []byte(policy), fromMS(created)
		org.ComputerInternetBulkRows = bulk != 0
		out = append(out, org)
	}
	return out, rows.Err()
}

func (o orgs) Count(ctx context.Context) (int, error) {
	var n int
	err := o.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM orgs`).Scan(&n)
	return n, err
}

const keyColumns = `id, org_id, name, hash, prefix, admin, capabilities, policy, created_at, revoked_at`

// emptyPolicy is a policy that restricts nothing, as stored.
const emptyPolicy = `{"settings":{}}`

// policyText is a policy as stored (empty: emptyPolicy).
func policyText(p []byte) string {
	if len(p) == 0 {
		return emptyPolicy
	}
	return string(p)
}

func scanKey(row interface{ Scan(...any) error }) (store.Key, error) {
	var k store.Key
	var admin int
	var caps, policy string
	var created int64
	var revoked sql.NullInt64
	err := row.Scan(&k.ID, &k.OrgID, &k.Name, &k.Hash, &k.Prefix, &admin, &caps, &policy, &created, &revoked)
	k.Admin, k.Capabilities, k.Policy, k.CreatedAt, k.RevokedAt = admin != 0, []byte(caps), []byte(policy), fromMS(created), fromNullMS(revoked)
	return k, err
}

func (k keys) Create(ctx context.Context, key store.Key) error {
	caps := string(key.Capabilities)
	if caps == "" {
		caps = "{}"
	}
	return k.s.write(func() error {
		_, err := k.db.ExecContext(ctx, `INSERT INTO keys (`+keyColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			key.ID, key.OrgID, key.Name, key.Hash, key.Prefix, boolInt(key.Admin), caps, policyText(key.Policy), ms(key.CreatedAt), nullMS(key.RevokedAt))
		return err
	})
}

func (k keys) Get(ctx context.Context, id string) (store.Key, error) {
	key, err := scanKey(k.db.QueryRowContext(ctx, `SELECT `+keyColumns+` FROM keys WHERE id = ?`, id))
	return key, notFound(err, "key "+id)
}

func (k keys) ByHash(ctx context.Context, hash string) (store.Key, error) {
	key, err := scanKey(k.db.QueryRowContext(ctx, `SELECT `+keyColumns+` FROM keys WHERE hash = ?`, hash))
	return key, notFound(err, "key")
}

func (k keys) List(ctx context.Context, orgID string) ([]store.Key, error) {
	q, args := `SELECT `+keyColumns+` FROM keys ORDER BY created_at`, []any{}
	if orgID != "" {
		q, args = `SELECT `+keyColumns+` FROM keys WHERE org_id = ? ORDER BY created_at`, []any{orgID}
	}
	rows, err := k.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Key
	for rows.Next() {
		key, err := scanKey(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, key)
	}
	return out, rows.Err()
}

func (k keys) Revoke(ctx context.Context, id string, at time.Time) error {
	var res sql.Result
	err := k.s.mustWrite(func() (err error) {
		res, err = k.db.ExecContext(ctx, `UPDATE keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`, ms(at), id)
		return err
	})
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return notFound(sql.ErrNoRows, "key "+id)
	}
	return nil
}

func (k keys) SetPolicy(ctx context.Context, id string, policy json.RawMessage) error {
	return k.s.write(func() error {
		res, err := k.db.ExecContext(ctx, `UPDATE keys SET policy = ? WHERE id = ?`, policyText(policy), id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return notFound(sql.ErrNoRows, "key "+id)
		}
		return nil
	})
}
