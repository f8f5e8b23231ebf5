-- Organisations' domain secrets are sealed at rest (AES-256-GCM with the
-- key in <data>/secrets.key, sealed.go): key_id names the key a value was
-- sealed with. Rows of 0011 (key_id '') hold values in clear; Open seals
-- them right after this migration.
ALTER TABLE org_domain_secrets ADD COLUMN key_id TEXT NOT NULL DEFAULT '';
