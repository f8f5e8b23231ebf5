-- The replayable conversation of a stored response (previous_response_id):
-- the gateway's own JSON, NULL when none was kept.
ALTER TABLE responses ADD COLUMN conversation TEXT;
