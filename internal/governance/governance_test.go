package governance_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/store"
	"github.com/cubicle-sandbox/cubicle/internal/store/sqlite"
)

// TestParseCapabilities accepts the seed's shape and refuses unknown
// capabilities, computer without tooling, negative limits and non-objects.
func TestParseCapabilities(t *testing.T) {
	seed := `{"tooling":{"system_tools":["computer"]},"computer":{"exec_timeout_seconds":30,"lifetime_seconds":600},"files":{},"artifacts":{}}`
	c, err := governance.ParseCapabilities([]byte(seed))
	if err != nil {
		t.Fatal(err)
	}
	if !c.HasComputer() || !c.HasSystemTool("computer") || !c.HasFiles() || !c.HasArtifacts() ||
		c.Computer.ExecTimeoutSeconds != 30 || c.Computer.LifetimeSeconds != 600 {
		t.Fatalf("seed capabilities: %+v", c)
	}
	for _, doc := range []string{"", "{}", "null"} {
		c, err := governance.ParseCapabilities([]byte(doc))
		if err != nil || c.HasComputer() || c.HasFiles() || c.HasArtifacts() || c.HasSystemTool("computer") {
			t.Fatalf("%q: %+v %v", doc, c, err)
		}
	}
	if c, err := governance.ParseCapabilities([]byte(`{"tooling":{"system_tools":[]},"computer":{}}`)); err != nil || !c.HasComputer() || c.HasSystemTool("computer") || c.HasFiles() {
		t.Fatalf("computer without the system tool: %+v %v", c, err)
	}
	if c, err := governance.ParseCapabilities([]byte(`{"tooling":{"system_tools":["computer"]}}`)); err != nil || c.HasComputer() {
		t.Fatalf("tooling alone grants computer: %+v %v", c, err)
	}
	bad := map[string]string{
		`{"shell":{}}`: `"shell"`,
		`{"tooling":{"system_tools":["computer"]},"computer":{},"exec":{}}`: `"exec"`,
		`{"computer":{}}`: "tooling",
		`{"tooling":{"system_tools":["computer"]},"computer":{"lifetime_seconds":-1}}`:     "negative",
		`{"tooling":{"system_tools":["computer"]},"computer":{"exec_timeout_seconds":-5}}`: "negative",
		`{"tooling":{"system_tools":["computer"]},"computer":{"lifetime_seconds":"long"}}`: "",
		`{"tooling":"yes"}`: "",
		`[]`:                "object",
		`"computer"`:        "object",
		`{"computer":`:      "",
	}
	for doc, want := range bad {
		_, err := governance.ParseCapabilities([]byte(doc))
		if err == nil || !errors.Is(err, governance.ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want ErrInvalid mentioning %q", doc, err, want)
		}
	}
}

// TestParseCapabilitiesRejectsUnknownLimit: a misspelt limit inside
// "computer" must not be silently dropped — the key would then run with the
// deployment's (larger) limits instead of the intended smaller ones.
func TestParseCapabilitiesRejectsUnknownLimit(t *testing.T) {
	for _, doc := range []string{
		`{"tooling":{"system_tools":["computer"]},"computer":{"lifetime_second":60}}`,
		`{"tooling":{"system_tools":["computer"]},"computer":{"exec_timeout":5}}`,
		`{"tooling":{"system_tool":["computer"]},"computer":{}}`,
	} {
		c, err := governance.ParseCapabilities([]byte(doc))
		if err == nil {
			t.Errorf("%s accepted as %+v (limits %+v)", doc, c, c.Computer)
		}
	}
}

// TestClamp: the smallest positive value wins; zero and negatives mean
// "not set"; limits never grow beyond the deployment's.
func TestClamp(t *testing.T) {
	cases := []struct {
		dep    int
		others []int
		want   int
	}{
		{3600, nil, 3600},
		{3600, []int{0, 0}, 3600},
		{3600, []int{600, 0}, 600},
		{3600, []int{0, 60}, 60},
		{3600, []int{600, 60}, 60},
		{3600, []int{60, 600}, 60},
		{3600, []int{7200, 9000}, 3600},
		{3600, []int{-5, 100}, 100},
		{30, []int{2, 1}, 1},
		{300, []int{1 << 40}, 300},
	}
	for _, c := range cases {
		if got := governance.Clamp(c.dep, c.others...); got != c.want {
			t.Errorf("Clamp(%d, %v) = %d, want %d", c.dep, c.others, got, c.want)
		}
	}
}

// TestKeysAndAuthentication: keys are stored hashed, authenticate to their
// org and capabilities, and stop working when revoked.
func TestKeysAndAuthentication(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "g.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	g := governance.New(st)
	admin, err := g.Bootstrap(ctx, "")
	if err != nil || !strings.HasPrefix(admin, "cub_") {
		t.Fatalf("bootstrap: %q %v", admin, err)
	}
	if again, err := g.Bootstrap(ctx, ""); err != nil || again != "" {
		t.Fatalf("second bootstrap: %q %v", again, err)
	}
	ap, err := g.Authenticate(ctx, admin)
	if err != nil || !ap.Admin() || !ap.Caps.HasComputer() || !ap.Org.AllowComputer {
		t.Fatalf("admin principal %+v %v", ap, err)
	}
	org, err := g.CreateOrg(ctx, "  research  ", governance.OrgSettings{AllowComputer: new(false)})
	if err != nil || org.Name != "research" || org.AllowComputer || !strings.HasPrefix(org.ID, "org_") {
		t.Fatalf("org %+v %v", org, err)
	}
	if _, err := g.CreateOrg(ctx, "   ", governance.OrgSettings{}); !errors.Is(err, governance.ErrInvalid) {
		t.Fatalf("blank org name: %v", err)
	}
	caps, _ := governance.ParseCapabilities([]byte(`{"files":{}}`))
	k, secret, err := g.CreateKey(ctx, org.ID, "reports", caps)
	if err != nil || !strings.HasPrefix(k.ID, "key_") || k.Hash == secret || k.Admin {
		t.Fatalf("key %+v %v", k, err)
	}
	if _, _, err := g.CreateKey(ctx, "org_nope", "x", caps); err == nil {
		t.Fatal("a key in a missing org was created")
	}
	p, err := g.Authenticate(ctx, secret)
	if err != nil || p.Key.ID != k.ID || p.Org.ID != org.ID || p.Caps.HasComputer() || !p.Caps.HasFiles() || p.Admin() {
		t.Fatalf("principal %+v %v", p, err)
	}
	for _, s := range []string{"", secret + "x", strings.ToUpper(secret), strings.Repeat("a", 300)} {
		if _, err := g.Authenticate(ctx, s); !errors.Is(err, governance.ErrUnauthenticated) {
			t.Fatalf("secret %.20q: %v", s, err)
		}
	}
	if err := g.RevokeKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Authenticate(ctx, secret); !errors.Is(err, governance.ErrUnauthenticated) {
		t.Fatalf("revoked key: %v", err)
	}
	// Secrets are not stored.
	st.Close()
	for _, name := range []string{"g.db", "g.db-wal"} {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		if bytes.Contains(b, []byte(secret)) || bytes.Contains(b, []byte(admin)) {
			t.Fatalf("a secret is stored in clear in %s", name)
		}
	}
}

// TestBootstrapRefusalLeavesNoTrace: a refused CUBICLE_ADMIN_KEY (too
// short) must not leave a half-bootstrapped store behind; otherwise the next
// start sees an organisation, skips bootstrapping and the deployment never
// gets an admin key.
func TestBootstrapRefusalLeavesNoTrace(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "g.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	g := governance.New(st)
	if _, err := g.Bootstrap(ctx, "short"); err == nil {
		t.Fatal("a short admin key was accepted")
	}
	const good = "cub_long_enough_admin_key_01"
	secret, err := g.Bootstrap(ctx, good)
	if err != nil || secret != good {
		t.Fatalf("bootstrap after a refused key: %q, %v; want the admin key %q", secret, err, good)
	}
	if p, err := g.Authenticate(ctx, good); err != nil || !p.Admin() {
		t.Fatalf("the admin key does not work: %+v %v", p, err)
	}
}

// TestInternetAllowed: an internet computer keeps its internet while its
// organisation has computers and computer_internet on and its key is not
// revoked; each change is seen at once (no cache), and by Authenticate.
func TestInternetAllowed(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	g := governance.New(st)
	ctx := context.Background()
	org, err := g.CreateOrg(ctx, "net", governance.OrgSettings{ComputerInternet: new(true)})
	if err != nil || !org.AllowComputer || !org.ComputerInternet {
		t.Fatalf("org %+v %v", org, err)
	}
	caps, _ := governance.ParseCapabilities([]byte(`{"tooling":{"system_tools":["computer"]},"computer":{}}`))
	k, secret, err := g.CreateKey(ctx, org.ID, "k", caps)
	if err != nil {
		t.Fatal(err)
	}
	want := func(what, reason string) {
		t.Helper()
		if why, err := g.InternetAllowed(ctx, org.ID, k.ID); err != nil || why != reason {
			t.Errorf("%s: %q %v, want %q", what, why, err, reason)
		}
	}
	want("switch on", "")
	if p, err := g.Authenticate(ctx, secret); err != nil || !p.Org.ComputerInternet {
		t.Fatalf("principal before: %+v %v", p.Org, err)
	}
	if _, err := g.UpdateOrg(ctx, org.ID, governance.OrgSettings{ComputerInternet: new(false)}); err != nil {
		t.Fatal(err)
	}
	want("switch off", "the organisation turned computer_internet off")
	if p, err := g.Authenticate(ctx, secret); err != nil || p.Org.ComputerInternet {
		t.Fatalf("principal after the switch (the cache must not hide it): %+v %v", p.Org, err)
	}
	g.UpdateOrg(ctx, org.ID, governance.OrgSettings{ComputerInternet: new(true), AllowComputer: new(false)})
	want("computers off", "the organisation no longer allows computers")
	g.UpdateOrg(ctx, org.ID, governance.OrgSettings{AllowComputer: new(true)})
	if err := g.RevokeKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	want("revoked", "the key was revoked")
	if _, err := g.UpdateOrg(ctx, "org_nosuch", governance.OrgSettings{}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("update of a missing org: %v", err)
	}
}

// TestAuditRecordDoesNotWait: Record queues the event and returns, even
// while another connection holds the database's write lock (a request must
// not wait for its audit insert); FlushAudit then waits for the writes, and
// the events are stored once each, in the order they were recorded.
func TestAuditRecordDoesNotWait(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "g.db")
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	g := governance.New(st)
	org, err := g.CreateOrg(ctx, "audit", governance.OrgSettings{})
	if err != nil {
		t.Fatal(err)
	}
	p := governance.Principal{Org: org}

	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	lock, err := raw.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if _, err := lock.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	recorded := make(chan struct{})
	go func() {
		for i := range 3 {
			g.Record(ctx, p, fmt.Sprintf("test.%d", i), "", nil)
		}
		close(recorded)
	}()
	select {
	case <-recorded:
	case <-time.After(5 * time.Second): // the store's busy timeout is 10 s
		t.Fatal("Record waited for the database's write lock")
	}
	if _, err := lock.ExecContext(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	g.FlushAudit()
	evs, err := st.Audit().List(ctx, store.EventFilter{OrgID: org.ID})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		got = append(got, e.Type)
	}
	if strings.Join(got, " ") != "test.0 test.1 test.2" || g.AuditHeld() != 0 {
		t.Fatalf("events %v (%d held), want test.0 test.1 test.2, none held", got, g.AuditHeld())
	}
}
