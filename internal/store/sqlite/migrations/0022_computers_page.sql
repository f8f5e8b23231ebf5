-- GET /v1/computers pages in the store: a keyset on (created_at, id)
-- within the organisation, so a page reads its own rows only.
CREATE INDEX computers_org_created ON computers (org_id, created_at, id);
