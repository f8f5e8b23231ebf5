CREATE TABLE files (
  id TEXT PRIMARY KEY,
  org_id TEXT NOT NULL,
  key_id TEXT NOT NULL,
  filename TEXT NOT NULL,
  purpose TEXT NOT NULL DEFAULT '',
  bytes BIGINT NOT NULL,
  sha256 TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  deleted_at BIGINT
);
CREATE INDEX files_org ON files (org_id, created_at);

CREATE TABLE artifacts (
  id TEXT PRIMARY KEY,
  org_id TEXT NOT NULL,
  key_id TEXT NOT NULL,
  computer_id TEXT NOT NULL DEFAULT '',
  response_id TEXT NOT NULL DEFAULT '',
  filename TEXT NOT NULL,
  bytes BIGINT NOT NULL,
  sha256 TEXT NOT NULL,
  created_at BIGINT NOT NULL
);
CREATE INDEX artifacts_org ON artifacts (org_id, created_at);
