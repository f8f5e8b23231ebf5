CREATE TABLE orgs (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  allow_computer INTEGER NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE TABLE keys (
  id TEXT PRIMARY KEY,
  org_id TEXT NOT NULL REFERENCES orgs(id),
  name TEXT NOT NULL,
  hash TEXT NOT NULL UNIQUE,
  prefix TEXT NOT NULL,
  admin INTEGER NOT NULL,
  capabilities TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  revoked_at INTEGER
);
CREATE INDEX keys_org ON keys(org_id);
CREATE TABLE computers (
  id TEXT PRIMARY KEY,
  org_id TEXT NOT NULL REFERENCES orgs(id),
  key_id TEXT NOT NULL REFERENCES keys(id),
  status TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  ready_at INTEGER,
  expires_at INTEGER NOT NULL,
  destroyed_at INTEGER,
  limits TEXT NOT NULL,
  metadata TEXT NOT NULL,
  response_id TEXT NOT NULL DEFAULT '',
  instance TEXT NOT NULL
);
CREATE INDEX computers_org ON computers(org_id, status);
CREATE TABLE usage (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  org_id TEXT NOT NULL,
  key_id TEXT NOT NULL,
  computer_id TEXT NOT NULL,
  kind TEXT NOT NULL,
  quantity INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  UNIQUE (computer_id, kind)
);
CREATE INDEX usage_org ON usage(org_id, created_at);
CREATE TABLE audit (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  org_id TEXT NOT NULL,
  key_id TEXT NOT NULL,
  type TEXT NOT NULL,
  computer_id TEXT NOT NULL DEFAULT '',
  data TEXT NOT NULL DEFAULT '{}',
  created_at INTEGER NOT NULL
);
CREATE INDEX audit_org ON audit(org_id, created_at);
