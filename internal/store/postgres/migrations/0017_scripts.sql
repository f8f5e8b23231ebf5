-- Organisations' own programs (/v1/scripts), each offered to models as
-- the tool script__<name> (docs/tools.md, "Scripts"). interpreter is a
-- JSON array of strings; version counts the writes.
CREATE TABLE scripts (
  org_id TEXT NOT NULL REFERENCES orgs(id),
  name TEXT NOT NULL,
  description TEXT NOT NULL,
  input_schema TEXT NOT NULL,
  interpreter TEXT NOT NULL,
  source TEXT NOT NULL,
  timeout_seconds INTEGER NOT NULL,
  version INTEGER NOT NULL,
  key_id TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  PRIMARY KEY (org_id, name)
);
