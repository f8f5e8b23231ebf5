-- The server that runs a background response while it is unfinished
-- ('' once it ended, and for every other response): another replica
-- forwards its polls and cancels there, and fails it once that server's
-- lease lapsed (docs/fleet.md).
ALTER TABLE responses ADD COLUMN instance TEXT NOT NULL DEFAULT '';
CREATE INDEX responses_instance ON responses (instance) WHERE instance <> '';
