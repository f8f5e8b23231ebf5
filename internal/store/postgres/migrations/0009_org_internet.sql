-- The organisation switch computer_internet (off by default): its
-- computers may have internet (docs/network.md).
ALTER TABLE orgs ADD COLUMN computer_internet BOOLEAN NOT NULL DEFAULT false;
