-- Paused computers (POST /v1/computers/{id}/pause): how many times a
-- computer was paused (its running periods are numbered from 0) and when
-- the current pause began.
ALTER TABLE computers ADD COLUMN pauses INTEGER NOT NULL DEFAULT 0;
ALTER TABLE computers ADD COLUMN paused_at INTEGER;
-- One usage row per kind and running period of a computer (was: per kind).
CREATE TABLE usage_periods (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  org_id TEXT NOT NULL,
  key_id TEXT NOT NULL,
  computer_id TEXT NOT NULL,
  kind TEXT NOT NULL,
  quantity INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  period INTEGER NOT NULL DEFAULT 0,
  UNIQUE (computer_id, kind, period)
);
INSERT INTO usage_periods (id, org_id, key_id, computer_id, kind, quantity, created_at)
  SELECT id, org_id, key_id, computer_id, kind, quantity, created_at FROM usage;
DROP TABLE usage;
ALTER TABLE usage_periods RENAME TO usage;
CREATE INDEX usage_org ON usage(org_id, created_at);
