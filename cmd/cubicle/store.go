package main

import (
	"context"
	"os"
	"path/filepath"

	"github.com/cubicle-sandbox/cubicle/internal/store"
	"github.com/cubicle-sandbox/cubicle/internal/store/postgres"
	"github.com/cubicle-sandbox/cubicle/internal/store/sqlite"
)

// openStore opens the store of a server: the PostgreSQL database of
// storeURL (store.url) when it is set, else SQLite in the data directory.
// The data directory keeps the key that seals domain secrets either way.
func openStore(ctx context.Context, storeURL, data string) (store.Store, error) {
	if storeURL != "" {
		return postgres.Open(ctx, storeURL, data)
	}
	return sqlite.Open(ctx, filepath.Join(data, "cubicle.db"))
}

// openCLIStore is openStore for the commands that work on a server's
// store beside it (keys, orgs, template): its URL is $CUBICLE_STORE_URL.
func openCLIStore(ctx context.Context, data string) (store.Store, error) {
	return openStore(ctx, os.Getenv("CUBICLE_STORE_URL"), data)
}

// exclusive takes a PostgreSQL store for this server alone (the data
// directory's lock cannot tell two servers with different data
// directories on one database apart); SQLite is covered by that lock.
func exclusive(ctx context.Context, st store.Store) (release func(), err error) {
	if db, ok := st.(*postgres.DB); ok {
		return db.Exclusive(ctx)
	}
	return func() {}, nil
}

// storeName is the store as logged: its URL without a password, or sqlite.
func storeName(storeURL string) string {
	if storeURL == "" {
		return "sqlite"
	}
	return postgres.Redact(storeURL)
}
