package storetest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
	"github.com/cubicle-sandbox/cubicle/internal/store"
	"github.com/cubicle-sandbox/cubicle/internal/store/seal"
)

// wantKeyErr checks a lost or changed key's error: store.ErrSecretsKey (a
// 503, never a client's 4xx or an unclassified 500) whose message has
// every part of want.
func wantKeyErr(t *testing.T, err error, want ...string) {
	t.Helper()
	if !errors.Is(err, store.ErrSecretsKey) || !errdefs.IsUnavailable(err) {
		t.Fatalf("error %v, want store.ErrSecretsKey", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
}

// testOrgSecretsSealed (issue 13): organisations' domain secrets are
// sealed at rest: nothing of the database holds a value, the key file is
// made 0600 in the data directory at the first secret, a replacement says
// so, and a value reads back only through List.
func testOrgSecretsSealed(t *testing.T, b Backend) {
	ctx := context.Background()
	db, dir := b.open(t)
	seed(t, db)
	keyFile := filepath.Join(dir, seal.KeyFile)
	if _, err := os.Stat(keyFile); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a key file before the first secret: %v", err)
	}
	const v1, v2 = "Bearer sealed-value-3e9a1", "Bearer sealed-value-77f0b"
	replaced, err := db.OrgSecrets().Set(ctx, "org_1", store.OrgSecret{Domain: "api.example.com", Name: "Authorization", Value: v1, CreatedAt: time.Now()})
	if err != nil || replaced {
		t.Fatalf("set: replaced %v, %v", replaced, err)
	}
	if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the key file: %v %v", fi, err)
	}
	replaced, err = db.OrgSecrets().Set(ctx, "org_1", store.OrgSecret{Domain: "api.example.com", Name: "Authorization", Value: v2, CreatedAt: time.Now()})
	if err != nil || !replaced {
		t.Fatalf("replace: replaced %v, %v", replaced, err)
	}
	if _, err := db.OrgSecrets().Set(ctx, "org_1", store.OrgSecret{Domain: "*.example.org", Name: "X-Key", Value: v1, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	list, err := db.OrgSecrets().List(ctx, "org_1")
	if err != nil || len(list) != 2 || list[0].Value != v1 || list[1].Value != v2 {
		t.Fatalf("list: %+v %v", list, err)
	}
	names, err := db.OrgSecrets().Names(ctx, "org_1")
	if err != nil || len(names) != 2 || names[0].Value != "" || names[1].Name != "Authorization" {
		t.Fatalf("names: %+v %v", names, err)
	}
	db.Close()
	for _, v := range []string{v1, v2, "sealed-value"} {
		if f := b.InClear(t, dir, v); len(f) > 0 {
			t.Errorf("%q in clear in %v", v, f)
		}
	}
}

// testOrgSecretsKeyLostOrChanged: a lost, changed, unsafe or damaged key
// file, or an altered row, is an error that says what happened and what
// to do (store.ErrSecretsKey), never a panic; names and deletes work
// without the key; a new key is made only once no value needs the old one.
func testOrgSecretsKeyLostOrChanged(t *testing.T, b Backend) {
	ctx := context.Background()
	db, dir := b.open(t)
	keyFile := filepath.Join(dir, seal.KeyFile)
	seed(t, db)
	set := func(db store.Store, domain, v string) error {
		_, err := db.OrgSecrets().Set(ctx, "org_1", store.OrgSecret{Domain: domain, Name: "Authorization", Value: v, CreatedAt: time.Now()})
		return err
	}
	if err := set(db, "a.example.com", "va"); err != nil {
		t.Fatal(err)
	}
	if err := set(db, "b.example.com", "vb"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	orig, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}

	// Lost: every value is unreadable, a new secret is refused (a new key
	// would hide the loss), names and deletes still work.
	os.Remove(keyFile)
	db = b.Open(t, dir)
	_, err = db.OrgSecrets().List(ctx, "org_1")
	wantKeyErr(t, err, keyFile, "is missing", "restore it")
	wantKeyErr(t, set(db, "c.example.com", "vc"), keyFile, "is missing", "2 domain secrets sealed", "restore the file", "delete those secrets")
	if _, err := os.Stat(keyFile); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a key file was made while values sealed with the lost one remain")
	}
	if names, err := db.OrgSecrets().Names(ctx, "org_1"); err != nil || len(names) != 2 {
		t.Fatalf("names without the key: %+v %v", names, err)
	}
	db.Close()

	// Changed: each value names the key it needs and the file's.
	if err := os.WriteFile(keyFile, []byte(strings.Repeat("ab", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	db = b.Open(t, dir)
	_, err = db.OrgSecrets().List(ctx, "org_1")
	wantKeyErr(t, err, "was sealed with key", "but the key file "+keyFile+" holds key", "restore the key file it was sealed with, or set the secret again")
	db.Close()

	// Unsafe or damaged key files.
	os.WriteFile(keyFile, orig, 0o600)
	os.Chmod(keyFile, 0o644)
	db = b.Open(t, dir)
	_, err = db.OrgSecrets().List(ctx, "org_1")
	wantKeyErr(t, err, "can be read by others (mode 0644): chmod 600 "+keyFile)
	db.Close()
	os.Remove(keyFile)
	os.WriteFile(keyFile, []byte("not a key\n"), 0o600)
	db = b.Open(t, dir)
	_, err = db.OrgSecrets().List(ctx, "org_1")
	wantKeyErr(t, err, "does not hold a key (64 hex digits)")
	db.Close()

	// An altered row (another row's sealed value) does not unseal.
	os.Remove(keyFile)
	os.WriteFile(keyFile, orig, 0o600)
	b.Exec(t, dir, `UPDATE org_domain_secrets SET value = (SELECT value FROM org_domain_secrets WHERE domain = 'b.example.com') WHERE domain = 'a.example.com'`)
	db = b.Open(t, dir)
	_, err = db.OrgSecrets().List(ctx, "org_1")
	wantKeyErr(t, err, "a.example.com does not unseal", "set the secret again")

	// The way out without the old key: delete what needs it, then a new
	// key is made.
	os.Remove(keyFile)
	for _, d := range []string{"a.example.com", "b.example.com"} {
		if err := db.OrgSecrets().Delete(ctx, "org_1", d, "Authorization"); err != nil {
			t.Fatal(err)
		}
	}
	if err := set(db, "c.example.com", "vc"); err != nil {
		t.Fatalf("a secret once no value needs the lost key: %v", err)
	}
	if list, err := db.OrgSecrets().List(ctx, "org_1"); err != nil || len(list) != 1 || list[0].Value != "vc" {
		t.Fatalf("list with the new key: %+v %v", list, err)
	}
}
