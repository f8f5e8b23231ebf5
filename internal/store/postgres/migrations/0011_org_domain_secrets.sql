-- An organisation's domain secrets: headers Cubicle adds to its internet
-- computers' HTTPS requests to a domain (docs/network.md). The value is
-- read only to hand it to a computer's network; no answer shows it.
CREATE TABLE org_domain_secrets (
    org_id     TEXT NOT NULL REFERENCES orgs(id),
    domain     TEXT NOT NULL,
    name       TEXT NOT NULL,
    value      TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (org_id, domain, name)
);
