-- Several replicas on one database (docs/fleet.md): the URL other
-- replicas reach an instance at, to forward the requests for the
-- computers it owns ('' for a server that advertises none).
ALTER TABLE instances ADD COLUMN url TEXT NOT NULL DEFAULT '';
