-- Paused computers (POST /v1/computers/{id}/pause): how many times a
-- computer was paused (its running periods are numbered from 0) and when
-- the current pause began.
ALTER TABLE computers ADD COLUMN pauses INTEGER NOT NULL DEFAULT 0;
ALTER TABLE computers ADD COLUMN paused_at BIGINT;
-- One usage row per kind and running period of a computer (was: per kind).
ALTER TABLE usage ADD COLUMN period INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage DROP CONSTRAINT usage_computer_id_kind_key;
ALTER TABLE usage ADD CONSTRAINT usage_computer_kind_period UNIQUE (computer_id, kind, period);
