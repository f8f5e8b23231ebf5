package config_test

import (
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/config"
)

// TestStoreURL: store.url is empty (SQLite) by default, and takes a
// postgres:// or postgresql:// URL from the file or CUBICLE_STORE_URL.
func TestStoreURL(t *testing.T) {
	def, err := config.Load("", nil)
	if err != nil || def.Store.URL != "" || def.Store.Postgres() {
		t.Fatalf("default store %+v %v", def.Store, err)
	}
	const u = "postgres://cubicle:pw@db:5432/cubicle?sslmode=require"
	cfg, err := config.Load("", []string{"CUBICLE_STORE_URL=" + u})
	if err != nil || cfg.Store.URL != u || !cfg.Store.Postgres() {
		t.Fatalf("env store %+v %v", cfg.Store, err)
	}
	cfg, err = config.Load(writeFile(t, "[store]\nurl = \"postgresql:///cubicle?host=/run/postgresql\"\n"), nil)
	if err != nil || cfg.Store.URL != "postgresql:///cubicle?host=/run/postgresql" {
		t.Fatalf("file store %+v %v", cfg.Store, err)
	}
}
