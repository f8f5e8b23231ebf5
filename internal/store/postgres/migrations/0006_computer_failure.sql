-- Why a computer failed (its agent died); empty for every other end.
ALTER TABLE computers ADD COLUMN failure TEXT NOT NULL DEFAULT '';
