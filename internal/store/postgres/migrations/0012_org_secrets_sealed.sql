-- Organisations' domain secrets are sealed at rest (AES-256-GCM with the
-- key in <data>/secrets.key, internal/store/seal): key_id names the key a
-- value was sealed with. This backend never stored a value in clear.
ALTER TABLE org_domain_secrets ADD COLUMN key_id TEXT NOT NULL DEFAULT '';
