package config

import (
	"net/url"
	"strings"
)

// Store is where the server's state (organisations, keys, computers'
// records, usage, audit, files' records, stored responses, egress
// records) lives.
type Store struct {
	// URL names the database: empty for SQLite in <server.data>/cubicle.db
	// (the default), or a PostgreSQL URL, postgres://user:password@host:port/db
	// (libpq's parameters, e.g. ?sslmode=require or ?host=/run/postgresql
	// for a unix socket). The data directory still holds the computers'
	// disks, the blobs and the key that seals domain secrets.
	URL string `toml:"url"`
}

// Postgres reports whether the store is PostgreSQL.
func (s Store) Postgres() bool { return s.URL != "" }

func (s Store) validate() error {
	if s.URL == "" {
		return nil
	}
	u, err := url.Parse(s.URL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		shown := s.URL
		if err == nil {
			shown = u.Redacted()
		} else if i := strings.Index(shown, "@"); i >= 0 {
			shown = "…" + shown[i:] // the part before may hold a password
		}
		return invalid("store.url", "must be empty (SQLite in server.data) or a postgres:// URL, got %q", shown)
	}
	return nil
}
