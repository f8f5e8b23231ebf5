package sqlite

import (
	"context"
	"database/sql"
	"fmt"

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
		_, err := s.db.db.ExecContext(ctx, `INSERT INTO responses (id, org_id, key_id, created_at, body, conversation) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET body = excluded.body, conversation = excluded.conversation
		WHERE responses.org_id = excluded.org_id`,
			r.ID, r.OrgID, r.KeyID, ms(r.CreatedAt), string(r.Body), conv)
		return err
	})
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
	var res sql.Result
	err := s.db.mustWrite(func() (err error) {
		res, err = s.db.db.ExecContext(ctx, `DELETE FROM responses WHERE id = ? AND org_id = ?`, id, orgID)
		return err
	})
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("response %s: %w", id, store.ErrNotFound)
	}
	return nil
}
