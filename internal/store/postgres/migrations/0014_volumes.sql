-- Named persistent volumes (/v1/volumes): bounded ext4 images that
-- outlive computers. A deleted volume keeps its row (deleted_at) for the
-- record; its name can be used again.
CREATE TABLE volumes (
  id TEXT PRIMARY KEY,
  org_id TEXT NOT NULL REFERENCES orgs(id),
  key_id TEXT NOT NULL,
  name TEXT NOT NULL,
  size_mb BIGINT NOT NULL,
  created_at BIGINT NOT NULL,
  deleted_at BIGINT
);
CREATE UNIQUE INDEX volumes_org_name ON volumes(org_id, name) WHERE deleted_at IS NULL;
