package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cubicle-sandbox/cubicle/internal/store"
)

type responses struct{ s *DB }

// Responses stores the gateway's finished response objects.
func (s *DB) Responses() store.Responses { return responses{s} }

func (s responses) Put(ctx context.Context, r store.Response) error {
	var conv *string // NULL without a conversation
	if r.Conversation != nil {
		c := string(r.Conversation)
		conv = &c
	}
	return s.s.tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO responses (id, org_id, key_id, created_at, body, conversation, instance) VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (id) DO UPDATE SET body = excluded.body, conversation = excluded.conversation, instance = excluded.instance
		WHERE responses.org_id = excluded.org_id`,
			r.ID, r.OrgID, r.KeyID, ms(r.CreatedAt), string(r.Body), conv, r.Instance)
		if err != nil || tag.RowsAffected() == 0 {
			return err // none: the id belongs to another organisation
		}
		if _, err := tx.Exec(ctx, `DELETE FROM response_items WHERE response_id = $1`, r.ID); err != nil {
			return err
		}
		for id, item := range r.Items {
			if _, err := tx.Exec(ctx, `INSERT INTO response_items (org_id, item_id, response_id, item) VALUES ($1, $2, $3, $4)
				ON CONFLICT (org_id, item_id) DO UPDATE SET response_id = excluded.response_id, item = excluded.item`,
				r.OrgID, id, r.ID, string(item)); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s responses) Item(ctx context.Context, orgID, itemID string) (json.RawMessage, error) {
	return one(ctx, s.s.pool, "item "+itemID, func(r pgx.Row) (json.RawMessage, error) {
		var item string
		err := r.Scan(&item)
		return json.RawMessage(item), err
	}, `SELECT item FROM response_items WHERE org_id = $1 AND item_id = $2`, orgID, itemID)
}

func (s responses) Get(ctx context.Context, orgID, id string) (store.Response, error) {
	return one(ctx, s.s.pool, "response "+id, func(row pgx.Row) (store.Response, error) {
		var r store.Response
		var created int64
		var body string
		var conv *string
		err := row.Scan(&r.ID, &r.OrgID, &r.KeyID, &created, &body, &conv)
		r.CreatedAt, r.Body = fromMS(created), []byte(body)
		if conv != nil {
			r.Conversation = []byte(*conv)
		}
		return r, err
	}, `SELECT id, org_id, key_id, created_at, body, conversation FROM responses WHERE id = $1 AND org_id = $2`, id, orgID)
}

func (s responses) Delete(ctx context.Context, orgID, id string) error {
	var n int64
	err := s.s.tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM responses WHERE id = $1 AND org_id = $2`, id, orgID)
		if n = tag.RowsAffected(); err != nil || n == 0 {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM response_items WHERE response_id = $1`, id)
		return err
	})
	if err == nil && n == 0 {
		return fmt.Errorf("response %s: %w", id, store.ErrNotFound)
	}
	return err
}

func (s responses) List(ctx context.Context, orgID, after string, limit int, desc bool) ([]store.Response, error) {
	cmp, dir := ">", "ASC"
	if desc {
		cmp, dir = "<", "DESC"
	}
	w := &where{}
	w.add("org_id = ?", orgID)
	if after != "" {
		type pos struct{ created, seq int64 }
		p, err := one(ctx, s.s.pool, "response "+after, func(r pgx.Row) (pos, error) {
			var p pos
			return p, r.Scan(&p.created, &p.seq)
		}, `SELECT created_at, seq FROM responses WHERE id = $1 AND org_id = $2`, after, orgID)
		if err != nil {
			return nil, err
		}
		// Creation times are whole seconds: the order stored breaks ties.
		w.add("(created_at, seq) "+cmp+" (?, ?)", p.created, p.seq)
	}
	q := `SELECT id, org_id, key_id, created_at, body, instance FROM responses WHERE ` + w.clauses +
		` ORDER BY created_at ` + dir + `, seq ` + dir + w.limit(limit)
	out, err := list(ctx, s.s, scanResponse, q, w.args...)
	if len(out) == 0 {
		out = nil // as SQLite's
	}
	return out, err
}

// Unfinished reads every body once (a scan at startup): only background
// responses are stored before they end.
func (s responses) Unfinished(ctx context.Context) ([]store.Response, error) {
	return list(ctx, s.s, scanResponse, `SELECT id, org_id, key_id, created_at, body, instance FROM responses
		WHERE body LIKE '%"status":"queued"%' OR body LIKE '%"status":"in_progress"%'`)
}

// Orphaned reads the responses of servers whose lease lapsed (indexed by
// instance: only unfinished background responses have one).
func (s responses) Orphaned(ctx context.Context, before time.Time) ([]store.Response, error) {
	return list(ctx, s.s, scanResponse, `SELECT r.id, r.org_id, r.key_id, r.created_at, r.body, r.instance FROM responses r
		LEFT JOIN instances i ON i.id = r.instance WHERE r.instance <> '' AND (i.id IS NULL OR i.last_seen < $1)`, ms(before))
}

// scanResponse reads a response's id, org, key, creation time, body and
// instance.
func scanResponse(row pgx.Row) (store.Response, error) {
	var r store.Response
	var created int64
	var body string
	err := row.Scan(&r.ID, &r.OrgID, &r.KeyID, &created, &body, &r.Instance)
	r.CreatedAt, r.Body = fromMS(created), []byte(body)
	return r, err
}
