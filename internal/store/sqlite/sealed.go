package sqlite

import (
	"context"
	"crypto/cipher"
	"database/sql"
	"fmt"
	"path/filepath"

	"github.com/cubicle-sandbox/cubicle/internal/store/seal"
)

// Organisations' domain secrets are sealed at rest by internal/store/seal
// (docs/network.md, "Domain secrets"), with the key in SecretsKeyFile next
// to the database.

// SecretsKeyFile is the file, next to the database, that holds the key of
// the organisations' domain secrets.
const SecretsKeyFile = seal.KeyFile

func newSealer(dbPath string) *seal.Sealer { return seal.New(filepath.Dir(dbPath)) }

// sealKey is the key to seal a new value with: the key file's, made now
// when there is none, unless the database holds values sealed with a key
// (then the file was lost, and a new key would hide that: restore it, or
// delete those secrets first).
func (d *DB) sealKey(ctx context.Context) (cipher.AEAD, string, error) {
	var n int
	var kid sql.NullString
	if err := d.db.QueryRowContext(ctx, `SELECT COUNT(*), MIN(key_id) FROM org_domain_secrets WHERE key_id != ''`).Scan(&n, &kid); err != nil {
		return nil, "", err
	}
	return d.secrets.ForNew(n, kid.String)
}

// sealCleartext seals the values migration 0011 stored in clear (an
// empty key_id), overwriting the clear bytes in the database file (secure_delete)
// and emptying the write-ahead log after.
func (d *DB) sealCleartext(ctx context.Context) error {
	var n int
	if err := d.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM org_domain_secrets WHERE key_id = ''`).Scan(&n); err != nil || n == 0 {
		return err
	}
	aead, id, err := d.sealKey(ctx)
	if err != nil {
		return fmt.Errorf("seal the organisations' domain secrets stored in clear: %w", err)
	}
	conn, err := d.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `PRAGMA secure_delete = ON`); err != nil {
		return err
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `PRAGMA secure_delete = OFF`)
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `SELECT org_id, domain, name, value FROM org_domain_secrets WHERE key_id = ''`)
	if err != nil {
		return err
	}
	type row struct{ org, domain, name, value string }
	var clear []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.org, &r.domain, &r.name, &r.value); err != nil {
			rows.Close()
			return err
		}
		clear = append(clear, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, r := range clear {
		if _, err := tx.ExecContext(ctx, `UPDATE org_domain_secrets SET value = ?, key_id = ? WHERE org_id = ? AND domain = ? AND name = ?`,
			seal.Seal(aead, r.org, r.domain, r.name, r.value), id, r.org, r.domain, r.name); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	_, err = conn.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`)
	return err
}
