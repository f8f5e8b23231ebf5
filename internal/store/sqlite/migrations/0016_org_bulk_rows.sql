-- The organisation switch computer_internet_bulk_rows (off by default):
-- rows of datastores may be delivered to its computers that reach the
-- internet (docs/tools.md, "Rows delivered to the computer").
ALTER TABLE orgs ADD COLUMN computer_internet_bulk_rows INTEGER NOT NULL DEFAULT 0;
