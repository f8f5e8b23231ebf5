package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/store"
)

type responses struct{ db *DB }

// Responses stores the gateway's finished response objects.
func (s *DB) Responses() store.Responses { return responses{s} }

func (s responses) Put(ctx context.Context, r store.Response) error {
	var conv any // NULL without a conversation
	if r.Conversation != nil {
		conv = string(r.Conversation)
	}
	return s.db.write(func() error {
		return s.db.tx(ctx, func(tx *sql.Tx) error {
			res, err := tx.ExecContext(ctx, `INSERT INTO responses (id, org_id, key_id, created_at, body, conversation, instance) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET body = excluded.body, conversation = excluded.conversation, instance = excluded.instance
		WHERE responses.org_id = excluded.org_id`,
				r.ID, r.OrgID, r.KeyID, ms(r.CreatedAt), string(r.Body), conv, r.Instance)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 0 {
				return nil // the id belongs to another organisation
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM response_items WHERE response_id = ?`, r.ID); err != nil {
				return err
			}
			for id, item := range r.Items {
				if _, err := tx.ExecContext(ctx, `INSERT INTO response_items (org_id, item_id, response_id, item) VALUES (?, ?, ?, ?)
				ON CONFLICT (org_id, item_id) DO UPDATE SET response_id = excluded.response_id, item = excluded.item`,
					r.OrgID, id, r.ID, string(item)); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

func (s responses) Item(ctx context.Context, orgID, itemID string) (json.RawMessage, error) {
	var item string
	err := s.db.db.QueryRowContext(ctx, `SELECT item FROM response_items WHERE org_id = ? AND item_id = ?`, orgID, itemID).Scan(&item)
	return json.RawMessage(item), notFound(err, "item "+itemID)
}

func (s responses) Get(ctx context.Context, orgID, id string) (store.Response, error) {
	var r store.Response
	var created int64
	var body string
	var conv sql.NullString
	err := s.db.db.QueryRowContext(ctx, `SELECT id, org_id, key_id, created_at, body, conversation FROM responses WHERE id = ? AND org_id = ?`,
		id, orgID).Scan(&r.ID, &r.OrgID, &r.KeyID, &created, &body, &conv)
	r.CreatedAt, r.Body = fromMS(created), []byte(body)
	if conv.Valid {
		r.Conversation = []byte(conv.String)
	}
	return r, notFound(err, "response "+id)
}

func (s responses) Delete(ctx context.Context, orgID, id string) error {
	var n int64
	err := s.db.mustWrite(func() error {
		return s.db.tx(ctx, func(tx *sql.Tx) error {
			res, err := tx.ExecContext(ctx, `DELETE FROM responses WHERE id = ? AND org_id = ?`, id, orgID)
			if err != nil {
				return err
			}
			if n, _ = res.RowsAffected(); n == 0 {
				return nil
			}
			_, err = tx.ExecContext(ctx, `DELETE FROM response_items WHERE response_id = ?`, id)
			return err
		})
	})
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("response %s: %w", id, store.ErrNotFound)
	}
	return nil
}

func (s responses) List(ctx context.Context, orgID, after string, limit int, desc bool) ([]store.Response, error) {
	cmp, dir := ">", "ASC"
	if desc {
		cmp, dir = "<", "DESC"
	}
	where, args := "org_id = ?", []any{orgID}
	if after != "" {
		var created, row int64
		err := s.db.db.QueryRowContext(ctx, `SELECT created_at, rowid FROM responses WHERE id = ? AND org_id = ?`, after, orgID).Scan(&created, &row)
		if err != nil {
			return nil, notFound(err, "response "+after)
		}
		// Creation times are whole seconds: the row's order breaks ties.
		where += " AND (created_at, rowid) " + cmp + " (?, ?)"
		args = append(args, created, row)
	}
	args = append(args, limit)
	return s.query(ctx, `SELECT id, org_id, key_id, created_at, body, instance FROM responses WHERE `+where+
		` ORDER BY created_at `+dir+`, rowid `+dir+` LIMIT ?`, args...)
}

// Unfinished reads every body once (a scan at startup): only background
// responses are stored before they end.
func (s responses) Unfinished(ctx context.Context) ([]store.Response, error) {
	return s.query(ctx, `SELECT id, org_id, key_id, created_at, body, instance FROM responses
		WHERE body LIKE '%"status":"queued"%' OR body LIKE '%"status":"in_progress"%'`)
}

// Orphaned reads the responses of servers whose lease lapsed (indexed by
// instance: only unfinished background responses have one).
func (s responses) Orphaned(ctx context.Context, before time.Time) ([]store.Response, error) {
	return s.query(ctx, `SELECT r.id, r.org_id, r.key_id, r.created_at, r.body, r.instance FROM responses r
		LEFT JOIN instances i ON i.id = r.instance WHERE r.instance <> '' AND (i.id IS NULL OR i.last_seen < ?)`, ms(before))
}

// query reads responses (id, org, key, creation time, body and instance)
// by q.
func (s responses) query(ctx context.Context, q string, args ...any) ([]store.Response, error) {
	rows, err := s.db.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Response
	for rows.Next() {
		var r store.Response
		var created int64
		var body string
		if err := rows.Scan(&r.ID, &r.OrgID, &r.KeyID, &created, &body, &r.Instance); err != nil {
			return nil, err
		}
		r.CreatedAt, r.Body = fromMS(created), []byte(body)
		out = append(out, r)
	}
	return out, rows.Err()
}
