package jupyter

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/config"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// Config is the gateway's part of the deployment's configuration.
type Config struct {
	// CullIdle deletes a kernel without connections and without activity
	// for this long; 0 never culls.
	CullIdle time.Duration
	// MemoryMB and Lifetime of a kernel's computer; 0: the deployment's
	// defaults (keys and the deployment clamp them as usual, the lifetime
	// in whole seconds).
	MemoryMB int64
	Lifetime time.Duration
	// MountRoots are where working directories may be mounted from.
	MountRoots config.MountRoots
}

// Server is the Kernel Gateway API.
type Server struct {
	cfg Config
	mgr *computer.Manager
	gov *governance.Service
	now func() time.Time
	// queueBytes bounds each connection's queue of kernel output.
	queueBytes atomic.Int64
	stop       chan struct{}
	bg         sync.WaitGroup // the culler
	pumps      sync.WaitGroup // one per relay

	mu      sync.Mutex
	kernels map[string]*kernel
	closed  bool
}

// New returns the gateway; call Close at the end.
func New(cfg Config, mgr *computer.Manager, gov *governance.Service) *Server {
	s := &Server{cfg: cfg, mgr: mgr, gov: gov, now: time.Now, stop: make(chan struct{}), kernels: map[string]*kernel{}}
	s.queueBytes.Store(connQueueBytes)
	if cfg.CullIdle > 0 {
		s.bg.Add(1)
		go s.cull()
	}
	return s
}

// Routes registers the API's routes with handle (a ServeMux's Handle).
func (s *Server) Routes(handle func(pattern string, h http.Handler)) {
	handle("GET /api/kernelspecs", s.auth(s.listSpecs))
	handle("GET /api/kernelspecs/{name}", s.auth(s.getSpec))
	handle("GET /kernelspecs/{name}/{path...}", s.auth(s.specResource))
	handle("GET /api/kernels", s.auth(s.listKernels))
	handle("POST /api/kernels", s.auth(s.startKernel))
	handle("GET /api/kernels/{id}", s.auth(s.getKernel))
	handle("DELETE /api/kernels/{id}", s.auth(s.deleteKernel))
	handle("POST /api/kernels/{id}/interrupt", s.auth(s.interruptKernel))
	handle("POST /api/kernels/{id}/restart", s.auth(s.restartKernel))
	handle("GET /api/kernels/{id}/channels", s.auth(s.channels))
}

// Close ends every relay and connection; the kernels' computers are the
// computer manager's to destroy.
func (s *Server) Close(ctx context.Context) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	all := make([]*kernel, 0, len(s.kernels))
	for _, k := range s.kernels {
		all = append(all, k)
	}
	clear(s.kernels)
	s.mu.Unlock()
	close(s.stop)
	s.bg.Wait()
	for _, k := range all {
		k.shut(ctx, errClosed.Error())
	}
	done := make(chan struct{})
	go func() { s.pumps.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
	}
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// pump runs k's pump for relay, tracked for Close.
func (s *Server) pump(k *kernel, relay sandbox.Kernel) {
	s.pumps.Add(1)
	go func() {
		defer s.pumps.Done()
		k.pump(s, relay)
	}()
}

// cull deletes idle kernels.
func (s *Server) cull() {
	defer s.bg.Done()
	every := min(s.cfg.CullIdle/4, 5*time.Second)
	t := time.NewTicker(max(every, 100*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		now := s.now()
		for _, k := range s.snapshot() {
			if k.idleSince(now) >= s.cfg.CullIdle {
				s.remove(context.Background(), k, "culled")
			}
		}
	}
}

func (s *Server) snapshot() []*kernel {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*kernel, 0, len(s.kernels))
	for _, k := range s.kernels {
		out = append(out, k)
	}
	return out
}
