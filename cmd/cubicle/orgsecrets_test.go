package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/store"
	"github.com/cubicle-sandbox/cubicle/internal/store/sqlite"
)

// TestOrgsSecretCLI (issue 13): 'cubicle orgs secret-set' reads the value
// from standard input and seals it (the key file is made 0600; no file of
// the data directory holds the value), 'secrets' lists domains and names
// only, and each change is audited with via "cli", never the value.
func TestOrgsSecretCLI(t *testing.T) {
	dir := t.TempDir()
	r := cli(t, "orgs", "create", "--data", dir, "--name", "acme", "--json")
	if r.code != 0 {
		t.Fatalf("orgs create: %+v", r)
	}
	var o struct{ ID string }
	if err := json.Unmarshal([]byte(r.stdout), &o); err != nil || o.ID == "" {
		t.Fatalf("orgs create --json: %q %v", r.stdout, err)
	}
	org := o.ID
	const value = "Bearer cli-secret-6a0d"
	set := func() cliResult {
		cmd := exec.Command(cubicleBin, "orgs", "secret-set", "--data", dir, "--domain", "api.example.com", "--header", "authorization", org)
		cmd.Stdin = strings.NewReader(value + "\n")
		return runCommand(t, cmd, []string{"orgs", "secret-set"})
	}
	for range 2 {
		if r := set(); r.code != 0 || !strings.Contains(r.stdout, "set Authorization for api.example.com") {
			t.Fatalf("secret-set: %+v", r)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, sqlite.SecretsKeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the key file: %v %v", fi, err)
	}
	var outs []string
	for _, args := range [][]string{{"secrets", org}, {"secrets", "--json", org}} {
		r := cli(t, append([]string{"orgs"}, append(args[:len(args)-1:len(args)-1], "--data", dir, args[len(args)-1])...)...)
		if r.code != 0 || !strings.Contains(r.stdout, "api.example.com") || !strings.Contains(r.stdout, "Authorization") {
			t.Fatalf("orgs %v: %+v", args, r)
		}
		outs = append(outs, r.stdout, r.stderr)
	}
	if r := cli(t, "orgs", "secret-rm", "--data", dir, "--domain", "api.example.com", "--header", "Authorization", org); r.code != 0 {
		t.Fatalf("secret-rm: %+v", r)
	}
	for _, o := range outs {
		if strings.Contains(o, "cli-secret") {
			t.Errorf("a listing shows the value: %s", o)
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if b, err := os.ReadFile(filepath.Join(dir, e.Name())); err == nil && bytes.Contains(b, []byte("cli-secret")) {
			t.Errorf("the value is in clear in %s", e.Name())
		}
	}
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "cubicle.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	evs, err := st.Audit().List(context.Background(), store.EventFilter{OrgID: org})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		got = append(got, e.Type+" "+string(e.Data))
	}
	want := []string{
		`org.domain_secret_created {"domain":"api.example.com","name":"Authorization","via":"cli"}`,
		`org.domain_secret_replaced {"domain":"api.example.com","name":"Authorization","via":"cli"}`,
		`org.domain_secret_deleted {"domain":"api.example.com","name":"Authorization","via":"cli"}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("audit:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestOrgsBulkRowsCLI: --bulk-rows sets an organisation's
// computer_internet_bulk_rows at creation and later; anything but on|off
// is refused naming the flag.
func TestOrgsBulkRowsCLI(t *testing.T) {
	dir := t.TempDir()
	r := cli(t, "orgs", "create", "--data", dir, "--name", "rows", "--bulk-rows", "on", "--json")
	var org struct {
		ID       string `json:"id"`
		BulkRows bool   `json:"computer_internet_bulk_rows"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &org) != nil || !org.BulkRows {
		t.Fatalf("orgs create --bulk-rows on: %+v", r)
	}
	if r := cli(t, "orgs", "set", "--data", dir, "--bulk-rows", "off", org.ID); r.code != 0 || !strings.Contains(r.stdout, "bulk_rows=false") {
		t.Fatalf("orgs set --bulk-rows off: %+v", r)
	}
	if r := cli(t, "orgs", "set", "--data", dir, "--bulk-rows", "yes", org.ID); r.code != 2 || !strings.Contains(r.stderr, "--bulk-rows must be on or off") {
		t.Fatalf("orgs set --bulk-rows yes: %+v", r)
	}
}
