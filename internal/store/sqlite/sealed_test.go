package sqlite_test

import (
	"context"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// TestOrgSecretsCleartextSealedAtOpen: values migration 0011 stored in
// clear are sealed when the database is opened, and their clear bytes are
// gone from the files (only SQLite ever stored them in clear).
func TestOrgSecretsCleartextSealedAtOpen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := open(t, dir)
	if err := db.Orgs().Create(ctx, store.Org{ID: "org_1", Name: "one", AllowComputer: true, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	const v = "Bearer legacy-clear-value-51c2"
	exec(t, dir, `INSERT INTO org_domain_secrets (org_id, domain, name, value, created_at) VALUES ('org_1', 'api.example.com', 'Authorization', '`+v+`', 0)`,
		`INSERT INTO org_domain_secrets (org_id, domain, name, value, created_at) VALUES ('org_1', 'b.example.com', 'X-B', '`+v+`-b', 0)`)
	if len(inFiles(t, dir, v)) == 0 {
		t.Fatal("the clear rows are not in the files: the test proves nothing")
	}
	db = open(t, dir)
	list, err := db.OrgSecrets().List(ctx, "org_1")
	if err != nil || len(list) != 2 || list[0].Value != v || list[1].Value != v+"-b" {
		t.Fatalf("list after sealing: %+v %v", list, err)
	}
	db.Close()
	if f := inFiles(t, dir, "legacy-clear-value"); len(f) > 0 {
		t.Errorf("a value stored in clear is still in %v", f)
	}
}
