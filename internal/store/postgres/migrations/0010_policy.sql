-- policy.settings of organisations and keys (regions_allow,
-- region_exceptions, providers_allow, hosts_allow, redact_pii): what
-- restricts their computers (docs/network.md, "Denied by policy.").
ALTER TABLE orgs ADD COLUMN policy TEXT NOT NULL DEFAULT '{"settings":{}}';
ALTER TABLE keys ADD COLUMN policy TEXT NOT NULL DEFAULT '{"settings":{}}';
