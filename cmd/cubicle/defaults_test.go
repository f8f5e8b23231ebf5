package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/config"
	"github.com/cubicle-sandbox/cubicle/internal/datastore"
	"github.com/cubicle-sandbox/cubicle/internal/files"
	"github.com/cubicle-sandbox/cubicle/internal/httpapi"
	"github.com/cubicle-sandbox/cubicle/internal/responses"
	"github.com/cubicle-sandbox/cubicle/internal/store/sqlite"
)

// firstTOML is the first ```toml block of a document in docs/.
func firstTOML(t *testing.T, doc string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", doc))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "```toml\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatalf("docs/%s has no toml block", doc)
	}
	return block
}

// TestComponentDefaults: the keys config leaves 0 take the component's own
// default, defined once there, and the documented configuration
// (docs/api.md, docs/gateway.md) names those same values.
func TestComponentDefaults(t *testing.T) {
	path := filepath.Join(t.TempDir(), "documented.toml")
	os.WriteFile(path, []byte(firstTOML(t, "api.md")+firstTOML(t, "gateway.md")), 0o600)
	doc, err := config.Load(path, nil)
	if err != nil {
		t.Fatalf("the documented configuration: %v", err)
	}
	if doc.Server.BodyTimeout() != httpapi.DefaultBodyTimeout ||
		doc.Gateway.Timeout() != responses.DefaultTimeout || doc.Gateway.IdleTimeout() != responses.DefaultIdleTimeout ||
		doc.Gateway.MaxRounds != responses.DefaultMaxRounds || int64(doc.Files.MaxBytes) != files.DefaultMaxBytes ||
		doc.Gateway.MaxBackgroundResponses != responses.DefaultMaxBackground ||
		doc.Gateway.MaxBackgroundResponsesPerOrg != responses.DefaultMaxBackgroundPerOrg ||
		time.Duration(doc.Gateway.ShellTaskGraceSeconds)*time.Second != responses.DefaultShellTaskGrace ||
		doc.Files.InputMaxFiles != files.DefaultInputMaxFiles || int64(doc.Files.InputMaxBytes) != files.DefaultInputMaxBytes {
		t.Fatalf("documented %+v %+v %+v differ from the components' defaults", doc.Server, doc.Files, doc.Gateway)
	}
	if doc.Gateway.DeliverMaxRows != datastore.DefaultDeliverMaxRows || doc.Gateway.DeliverMaxBytes != datastore.DefaultDeliverMaxBytes ||
		doc.Gateway.DeliverConcurrency != datastore.DefaultDeliverConcurrency {
		t.Fatalf("documented delivery limits %+v differ from the datastores' defaults", doc.Gateway)
	}

	def := config.Default()
	if def.Server.BodyTimeoutSeconds != 0 || def.Files != (config.Files{}) || def.Gateway.TimeoutSeconds != 0 ||
		def.Gateway.IdleTimeoutSeconds != 0 || def.Gateway.MaxRounds != 0 || def.Gateway.MaxBackgroundResponses != 0 ||
		def.Gateway.MaxBackgroundResponsesPerOrg != 0 || def.Gateway.ShellTaskGraceSeconds != 0 {
		t.Fatalf("config repeats a component's default: %+v %+v %+v", def.Server, def.Files, def.Gateway)
	}
	if gc, err := gatewayConfig(def.Gateway); err != nil || gc.Timeout != 0 || gc.IdleTimeout != 0 || gc.MaxRounds != 0 {
		t.Fatalf("gateway config %+v, %v: want zeros left to the gateway", gc, err)
	}
	def.Server.Data = t.TempDir()
	st, err := sqlite.Open(context.Background(), filepath.Join(def.Server.Data, "cubicle.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	svc, err := filesService(def, st)
	if err != nil || svc.MaxBytes() != files.DefaultMaxBytes {
		t.Fatalf("files service unset: max bytes %d, %v", svc.MaxBytes(), err)
	}
}

// TestDocumentedDatastores: the datastore configuration docs/gateway.md
// shows loads and passes datastore.Config's checks; a writing named query
// is refused naming its key.
func TestDocumentedDatastores(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "gateway.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(b), "```toml\n[[gateway.datastores]]")
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("docs/gateway.md has no [[gateway.datastores]] block")
	}
	path := filepath.Join(t.TempDir(), "ds.toml")
	os.WriteFile(path, []byte("[[gateway.datastores]]"+block), 0o600)
	cfg, err := config.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := datastoreConfig(cfg.Gateway)
	if err != nil || len(dc.Datastores) != 1 || dc.Datastores[0].Path != "/srv/shop.db" || dc.SQLTools[0].Params[0] != "status" {
		t.Fatalf("%+v %v", dc, err)
	}
	cfg.Gateway.SQLTools[0].Query = "DELETE FROM orders"
	if _, err := datastoreConfig(cfg.Gateway); err == nil || !strings.HasPrefix(err.Error(), "config: gateway.sql_tools[0].query: datastores are read-only") {
		t.Fatalf("a writing query: %v", err)
	}
}
