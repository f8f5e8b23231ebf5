package datastore_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/datastore"
)

// TestAnswerRedacted: for a key that redacts personal data (redact_pii in
// its policy) the answer's values are redacted, in both databases: a
// text's data, an integer that is a card number (then a string), a value
// the database's message quotes; other values stay. Another key reads the
// rows as they are.
func TestAnswerRedacted(t *testing.T) {
	masked := anyone
	masked.KeyPolicy.Settings.RedactPII = true
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			src, db := source(t, kind)
			for _, q := range []string{`CREATE TABLE people (id integer, email text, card bigint, phone text, note text)`,
				`INSERT INTO people VALUES (1, 'jan@example.nl', 4111111111111111, '+31 6 12345678', 'call 2026-12-06 13:00')`} {
				if _, err := db.Exec(q); err != nil {
					t.Fatal(err)
				}
			}
			s := newService(t, datastore.Config{Datastores: []datastore.Source{src}})
			ctx, q := context.Background(), json.RawMessage(`{"sql":"SELECT id, email, card, phone, note FROM people"}`)
			res := s.Answer(ctx, masked, "shop__query", q)
			if want := `{"columns":["id","email","card","phone","note"],"rows":[[1,"[redacted email]","[redacted card]","[redacted phone]","call 2026-12-06 13:00"]],"row_count":1,"truncated":false}`; res.Output != want {
				t.Fatalf("masked:\n got %s\nwant %s", res.Output, want)
			}
			res = s.Answer(ctx, anyone, "shop__query", q)
			if want := `{"columns":["id","email","card","phone","note"],"rows":[[1,"jan@example.nl",4111111111111111,"+31 6 12345678","call 2026-12-06 13:00"]],"row_count":1,"truncated":false}`; res.Output != want {
				t.Fatalf("unmasked:\n got %s\nwant %s", res.Output, want)
			}
			res = s.Answer(ctx, masked, "shop__query", json.RawMessage(`{"sql":"SELECT * FROM \"jan@example.nl\""}`))
			if !res.Failed || !strings.Contains(res.Output, "[redacted email]") || strings.Contains(res.Output, "jan@") {
				t.Fatalf("a failure quoting a value: %q", res.Output)
			}
		})
	}
}
