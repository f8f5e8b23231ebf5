package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/blob"
	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/config"
	"github.com/cubicle-sandbox/cubicle/internal/console"
	"github.com/cubicle-sandbox/cubicle/internal/datastore"
	"github.com/cubicle-sandbox/cubicle/internal/e2b"
	"github.com/cubicle-sandbox/cubicle/internal/egress/egresslog"
	"github.com/cubicle-sandbox/cubicle/internal/files"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/httpapi"
	"github.com/cubicle-sandbox/cubicle/internal/jupyter"
	"github.com/cubicle-sandbox/cubicle/internal/responses"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/linux"
	"github.com/cubicle-sandbox/cubicle/internal/scripts"
	"github.com/cubicle-sandbox/cubicle/internal/store"
)

const serveUsage = `Usage: cubicle serve [flags]

Serves the computers API over HTTP. State (a SQLite database and the
computers' disks) lives in the data directory; --store postgres://… (or
store.url, CUBICLE_STORE_URL) keeps the database in PostgreSQL instead. On first start it creates an
organisation and an admin key once it listens: CUBICLE_ADMIN_KEY sets the
key, otherwise a generated one is printed once ('cubicle keys create --admin'
makes another). Every config key can be overridden with
CUBICLE_<SECTION>_<KEY>, e.g. CUBICLE_COMPUTERS_POOL_SIZE=4.

Example:
  CUBICLE_ADMIN_KEY=cub_localdevkey0001 cubicle serve --listen 127.0.0.1:8080 --data /var/lib/cubicle

Flags:
`

func serveCmd(args []string) int {
	fs := newFlags("serve", serveUsage)
	cfgPath := fs.String("config", "", "TOML configuration file")
	listen := fs.String("listen", "", "address to listen on (default from config: 127.0.0.1:8080)")
	data := fs.String("data", "", "data directory (default from config: /var/lib/cubicle)")
	storeURL := fs.String("store", "", "the store: a postgres:// URL (default from config store.url: SQLite in the data directory)")
	driver := fs.String("driver", "", "what computers are: linux or kubernetes (default from config computers.driver: linux)")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	cfg, err := config.Load(*cfgPath, os.Environ())
	if err == nil {
		if *listen != "" {
			cfg.Server.Listen = *listen
		}
		if *data != "" {
			cfg.Server.Data, _ = filepath.Abs(*data)
		}
		if *storeURL != "" {
			cfg.Store.URL = *storeURL
		}
		if *driver != "" {
			cfg.Computers.Driver = *driver
		}
		err = cfg.Validate()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "cubicle serve: %v\n", err)
		return 2
	}
	setupLogging(cfg.Log)
	// A closed log pipe must not kill the server and orphan its computers.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "cubicle serve: %v\n", err)
		return 1
	}
	return 0
}

func setupLogging(c config.Log) {
	var level slog.Level
	level.UnmarshalText([]byte(c.Level))
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(os.Stderr, opts)
	if c.Format == "json" {
		h = slog.NewJSONHandler(os.Stderr, opts)
	}
	slog.SetDefault(slog.New(h))
}

// serve opens the data directory, builds the server (build) and serves
// until ctx ends. What must follow listening (the admin key, readiness
// after the isolation probe) happens after net.Listen.
func serve(ctx context.Context, cfg config.Config) error {
	gwc, err := gatewayConfig(cfg.Gateway)
	if err != nil {
		return err
	}
	gwc.PublicURL = cfg.Server.PublicURL
	if err := os.MkdirAll(cfg.Server.Data, 0o700); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	unlock, err := lockDataDir(cfg.Server.Data)
	if err != nil {
		return err
	}
	defer unlock()
	st, err := openStore(ctx, cfg.Store.URL, cfg.Server.Data)
	if err != nil {
		return err
	}
	defer st.Close()
	gov := governance.New(st)
	s, err := build(ctx, cfg, gwc, st, gov)
	if err != nil {
		return err
	}
	defer s.close()
	ln, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if err := bootstrapAdmin(ctx, gov, cfg.Server.Data); err != nil {
		ln.Close()
		return err
	}
	srv := httpServer(cfg.Server, forwarder(cfg, st, s.mgr, s.api))
	ln = httpapi.LimitListener(ln, cfg.Server.MaxConnections)
	go func() {
		if err := s.mgr.Probe(ctx); err != nil {
			slog.Error("isolation probe failed: the server stays unready", "err", err)
			return
		}
		s.api.SetReady(true)
		slog.Info("ready", "listen", ln.Addr().String())
	}()
	slog.Info("serving", "listen", ln.Addr().String(), "data", cfg.Server.Data, "store", storeName(cfg.Store.URL))
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	return s.shutdown(srv)
}

// httpServer serves h with c's timeouts: a request's headers must come
// within 10 s and an idle keep-alive connection is closed after
// idle_timeout_seconds. There is no whole-request read or write timeout:
// httpapi bounds each body's silence itself, so long streams (SSE, long
// execs, WebSockets) are not cut.
func httpServer(c config.Server, h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ConnContext: jupyter.ConnContext,
		IdleTimeout: c.IdleTimeout()}
}

// components are every part of a running server.
type components struct {
	mgr *computer.Manager
	gw  *responses.Gateway // nil: no upstream is configured
	kg  *jupyter.Server    // nil: the Jupyter API is off
	api *httpapi.API
	// egress keeps internet computers' records (nil: no internet).
	egress *egresslog.Writer
	// data are the operator's datastores (nil: none).
	data *datastore.Service
}

// build makes the components from cfg in dependency order (the driver,
// the files service, the computer manager, the gateway, the Jupyter API,
// the REST API), each given all it needs at construction. The manager is
// started.
func build(ctx context.Context, cfg config.Config, gwc responses.Config, st store.Store, gov *governance.Service) (*components, error) {
	net, internet, egressLog, err := network(cfg.Network, st.Egress(), gov)
	if err != nil {
		return nil, err
	}
	drv, startDriver, err := computerDriver(ctx, cfg, net)
	if errors.Is(err, linux.ErrUIDRange) {
		return nil, fmt.Errorf("config: computers.uid_range: %w", err)
	}
	if err != nil {
		return nil, err
	}
	fsvc, err := filesService(cfg, st)
	if err != nil {
		return nil, err
	}
	mc := managerConfig(cfg, fsvc)
	mc.Internet = internet
	driverManagerConfig(cfg, &mc)
	var gw *responses.Gateway // set below when the gateway is enabled
	mc.Fleet.Sweep = func(ctx context.Context, before time.Time) {
		if gw != nil {
			failOrphaned(ctx, gw, before, responses.StoppedSentence)
		}
	}
	if mc.Templates, err = templateStore(cfg, cfg.Server.Data); err != nil {
		return nil, err
	}
	s := &components{mgr: computer.New(mc, drv, st, gov), egress: egressLog}
	if startDriver != nil {
		startDriver(s.mgr, st)
	}
	scr := scripts.New(st, gov)
	if cfg.Gateway.Enabled() {
		if err := s.mgr.CheckKernelTemplate(ctx, gwc.CodeInterpreterTemplate, "gateway.code_interpreter_template"); err != nil {
			return nil, err
		}
		deps := responses.Deps{Computers: s.mgr, Files: fsvc, Store: st.Responses(), Instance: s.mgr.Instance(), Scripts: scr}
		if s.data, err = datastores(cfg.Gateway, s.mgr, gov); err != nil {
			return nil, err
		} else if s.data != nil {
			deps.Datastores = s.data
		}
		s.gw, err = responses.New(gwc, deps)
		if err != nil {
			return nil, err
		}
		gw = s.gw
		if err := failInterrupted(ctx, cfg, st, s.gw); err != nil {
			return nil, err
		}
	}
	if err := s.mgr.Start(ctx); err != nil {
		return nil, err
	}
	opts := httpapi.Options{Governance: gov, Computers: s.mgr, Store: st, Files: fsvc, Gateway: s.gw, Scripts: scr,
		BodyTimeout: cfg.Server.BodyTimeout(), PreviewDomain: cfg.Server.PreviewDomain}
	if s.gw != nil {
		slog.Info("gateway enabled", "upstreams", len(cfg.Gateway.Upstreams), "upstream_url", cfg.Gateway.UpstreamURL)
	}
	if !cfg.Computers.Enabled {
		slog.Warn("computers are disabled (computers.enabled = false): no new computer, no computer tools, no Jupyter API")
	}
	if jc := cfg.Jupyter; jc.Enabled && cfg.Computers.Enabled {
		s.kg = jupyter.New(jupyter.Config{CullIdle: jc.CullIdle(), MemoryMB: int64(jc.Memory) >> 20,
			Lifetime: jc.Lifetime(), MountRoots: jc.MountRoots}, s.mgr, gov)
		opts.Mounts = append(opts.Mounts, s.kg)
		slog.Info("jupyter kernel gateway API enabled", "path", "/api/kernels", "mount_roots", len(jc.MountRoots))
	}
	if cfg.E2B.Enabled && cfg.Computers.Enabled {
		// The E2B SDKs' protocols (docs/e2b.md): E2B_API_URL and
		// E2B_SANDBOX_URL are http(s)://<this server>/e2b.
		opts.Mounts = append(opts.Mounts, e2b.New(s.mgr, gov))
		slog.Info("e2b sdk api enabled", "path", e2b.Prefix)
	}
	opts.Mounts = append(opts.Mounts, console.New()) // the web console at / (docs/console.md)
	s.api = httpapi.New(opts)
	return s, nil
}

// shutdown stops serving: the HTTP server, the hijacked WebSockets, then
// the gateway's pending deletes (close destroys the rest).
func (s *components) shutdown(srv *http.Server) error {
	slog.Info("shutting down: destroying computers")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if s.gw != nil {
		s.gw.Stop() // background responses end failed; their streams end
	}
	if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	// Hijacked WebSocket connections are not waited for by Shutdown.
	if err := s.api.CloseSockets(ctx); err != nil {
		slog.Warn("shutting down", "err", err)
	}
	// Responses delete their computers after answering: wait for those
	// deletes before the manager closes (it destroys what is left).
	if s.gw != nil {
		if err := s.gw.Close(ctx); err != nil {
			slog.Warn("shutting down", "err", err)
		}
	}
	return nil
}

// close ends the Jupyter API's relays, then destroys every computer and
// waits (bounded) for their cleanup.
func (s *components) close() {
	if s.kg != nil {
		s.kg.Close(context.Background())
	}
	closeManager(s.mgr)
	if s.egress != nil {
		s.egress.Close() // after the computers: their last connections are recorded
	}
	if s.data != nil {
		s.data.Close()
	}
}

// filesService is the files and artifacts service over the blob directory
// (files.dir, else <data>/blobs).
func filesService(cfg config.Config, st store.Store) (*files.Service, error) {
	dir := cfg.Files.Dir
	if dir == "" {
		dir = filepath.Join(cfg.Server.Data, "blobs")
	}
	blobs, err := blob.NewDir(dir)
	if err != nil {
		return nil, err
	}
	return files.New(st, blobs, files.Limits{MaxBytes: int64(cfg.Files.MaxBytes),
		InputMaxFiles: cfg.Files.InputMaxFiles, InputMaxBytes: int64(cfg.Files.InputMaxBytes)}), nil
}

// managerConfig is the [computers] and [python] sections as the computer
// manager's configuration, exporting to fsvc.
func managerConfig(cfg config.Config, fsvc *files.Service) computer.Config {
	c := cfg.Computers
	return computer.Config{Disabled: !c.Enabled, Memory: int64(c.Memory), Pids: c.Pids, CPUs: c.CPUs, Disk: int64(c.Disk),
		Lifetime: c.Lifetime(), ExecTimeout: c.ExecTimeout(), MaxConcurrent: c.MaxConcurrent, PausedMax: c.PausedMax(),
		VolumeMax: int64(c.VolumeMaxSize), VolumesPerOrg: c.MaxVolumes,
		MemoryBudget: int64(c.MemoryBudget), PoolSize: c.PoolSize, MaxFileBytes: int64(c.MaxFileBytes),
		MaxTarBytes: int64(c.MaxTarBytes), MaxTarEntries: c.MaxTarEntries, TerminalGrace: c.TerminalGrace(),
		MaxOutputBytes: int64(c.MaxOutputBytes), Prelude: cfg.Python.Prelude, Artifacts: fsvc, Region: c.Region,
		Template: cfg.Template.Default, TemplatePools: cfg.Template.Pools,
		Fleet: computer.Fleet{Shared: cfg.Store.Postgres(), URL: cfg.Cluster.URL, Lease: cfg.Cluster.Lease()}}
}

// managerCloseTimeout bounds how long shutdown waits for computers'
// teardown; whatever is left is removed by the next start's GC.
const managerCloseTimeout = time.Minute

// closeManager destroys every computer and waits (bounded) for their
// cleanup to finish.
func closeManager(mgr *computer.Manager) {
	ctx, cancel := context.WithTimeout(context.Background(), managerCloseTimeout)
	defer cancel()
	mgr.Close(ctx)
}
