package httpapitest

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/httpapi"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/linux"
	"github.com/cubicle-sandbox/cubicle/internal/store/sqlite"
)

// Server is a real API started by Start.
type Server struct {
	URL string
	Gov *governance.Service
	// Admin is the principal of the admin key.
	Admin governance.Principal
}

// Config is a small deployment: cheap computers, no warm pool.
func Config() computer.Config {
	return computer.Config{Memory: 256 << 20, Pids: 128, CPUs: 1, Disk: 32 << 20, Lifetime: 600 * time.Second,
		ExecTimeout: 30 * time.Second, MaxConcurrent: 4, MemoryBudget: 4 << 30, MaxFileBytes: 1 << 20, MaxOutputBytes: 1 << 20}
}

// Start serves the real API on an httptest server until the test ends:
// computers of cfg run agentBin as their agent, and the first
// organisation's admin key is adminKey.
func Start(t testing.TB, agentBin, adminKey string, cfg computer.Config) *Server {
	t.Helper()
	return StartMounted(t, agentBin, adminKey, cfg, nil)
}

// Mounter makes a transport the API serves beside its own (httpapi.Mount)
// of the server's computers and keys.
type Mounter func(*computer.Manager, *governance.Service) httpapi.Mount

// StartMounted is Start with the transport mount makes served on the same
// listener (nil: none).
func StartMounted(t testing.TB, agentBin, adminKey string, cfg computer.Config, mount Mounter) *Server {
	t.Helper()
	ctx, dir := context.Background(), t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "cubicle.db"))
	if err != nil {
		t.Fatal(err)
	}
	gov := governance.New(st)
	if _, err := gov.Bootstrap(ctx, adminKey); err != nil {
		t.Fatal(err)
	}
	admin, err := gov.Authenticate(ctx, adminKey)
	if err != nil {
		t.Fatal(err)
	}
	drv, err := linux.New(linux.Config{StateDir: dir, AgentPath: agentBin})
	if err != nil {
		t.Fatal(err)
	}
	mgr := computer.New(cfg, drv, st, gov)
	if err := mgr.Start(ctx); err != nil {
		t.Fatal(err)
	}
	opts := httpapi.Options{Governance: gov, Computers: mgr, Store: st}
	if mount != nil {
		opts.Mounts = append(opts.Mounts, mount(mgr, gov))
	}
	api := httpapi.New(opts)
	api.SetReady(true)
	srv := httptest.NewServer(api)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		mgr.Close(context.Background())
		st.Close()
	})
	return &Server{URL: srv.URL, Gov: gov, Admin: admin}
}
