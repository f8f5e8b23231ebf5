-- The egress log of internet computers: one row per connection, refusal or
-- DNS question (docs/network.md); never payloads.
CREATE TABLE egress (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    org_id      TEXT NOT NULL,
    key_id      TEXT NOT NULL,
    computer_id TEXT NOT NULL,
    proto       TEXT NOT NULL,
    name        TEXT NOT NULL,
    addr        TEXT NOT NULL,
    port        INTEGER NOT NULL,
    verdict     TEXT NOT NULL,
    rule        TEXT NOT NULL,
    error       TEXT NOT NULL,
    sent        INTEGER NOT NULL,
    received    INTEGER NOT NULL,
    opened_at   INTEGER NOT NULL,
    closed_at   INTEGER NOT NULL
);
CREATE INDEX egress_org ON egress (org_id, id);
CREATE INDEX egress_computer ON egress (computer_id, id);
