-- seq orders responses stored in the same millisecond (SQLite's rowid).
CREATE TABLE responses (
  id TEXT PRIMARY KEY,
  seq BIGINT GENERATED ALWAYS AS IDENTITY,
  org_id TEXT NOT NULL,
  key_id TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  body TEXT NOT NULL
);
CREATE INDEX responses_org ON responses (org_id, created_at, seq);
