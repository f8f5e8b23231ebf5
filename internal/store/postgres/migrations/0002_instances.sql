CREATE TABLE instances (
  id TEXT PRIMARY KEY,
  started_at BIGINT NOT NULL,
  last_seen BIGINT NOT NULL
);
