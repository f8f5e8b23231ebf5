package computer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/artifact"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/log"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/store"
	"github.com/cubicle-sandbox/cubicle/internal/tools"
)

// Config are the deployment's limits for computers and what the manager
// runs on besides its driver, store and governance. Everything is given
// at construction (New); nothing is wired later.
type Config struct {
	// Disabled refuses every new computer (computers.enabled = false):
	// Create answers ErrForbidden naming the key, ToolsEnabled is false
	// (no computer tools, no code_interpreter) and there is no warm pool.
	// Computers recovered from a previous run are still served until
	// they end.
	Disabled bool
	Memory   int64
	Pids     int64
	CPUs     float64
	Disk     int64
	// Lifetime and ExecTimeout are the deployment's caps, which requests
	// and keys may only shrink (in whole seconds, as the API counts).
	Lifetime       time.Duration
	ExecTimeout    time.Duration
	MaxConcurrent  int
	MemoryBudget   int64
	PoolSize       int
	MaxFileBytes   int64
	MaxOutputBytes int64
	// MaxTarBytes and MaxTarEntries bound a directory's transfer as tar
	// (≤ 0: sandbox.DefaultMaxTarBytes, DefaultMaxTarEntries).
	MaxTarBytes   int64
	MaxTarEntries int
	// TerminalGrace is how long a terminal outlives its client for
	// another to attach (computers.terminal_grace_seconds; 0: none).
	TerminalGrace time.Duration
	// Prelude runs in every new Python kernel; pool computers start their
	// kernel with it ahead of time ("" disables both).
	Prelude string
	// Internet is what computers may reach (none unless enabled).
	Internet Internet
	// Region is where this deployment runs its computers
	// (computers.region; "" when not set): a policy's regions_allow must
	// list it (policy.go).
	Region string
	// Templates are the templates besides the host's (nil: only "host");
	// Template is the one computers that name none are made from ("":
	// "host").
	Templates Templates
	Template  string
	// TemplatePools are warm pools of other templates (template.pools):
	// name → size. The default template's pool is PoolSize.
	TemplatePools map[string]int
	// VolumeMax bounds a volume's size (computers.volume_max_size; 0:
	// DefaultVolumeMax); VolumesPerOrg how many an organisation may have
	// (computers.max_volumes; 0: DefaultVolumesPerOrg).
	VolumeMax     int64
	VolumesPerOrg int
	// PausedMax is how long a paused computer is kept before it is
	// deleted (computers.paused_max_seconds; 0: DefaultPausedMax).
	PausedMax time.Duration
	// Fleet is how this server shares its store with other replicas
	// (fleet.go; the zero value: it is the store's only server).
	Fleet Fleet
	// Artifacts keeps files and images as artifacts (export of
	// builtin__computer_read_file, save_images of python); nil: export
	// answers that it is not available and save_images is refused.
	Artifacts Artifacts
}

// Artifacts is the artifact store the manager exports to
// (internal/files.Service).
type Artifacts interface {
	// Export keeps a computer's file (path resolved inside it) as an
	// artifact of p.
	Export(ctx context.Context, p governance.Principal, sb sandbox.Files, computerID, path string) (artifact.Ref, error)
	// SaveImage keeps an image a kernel produced as an artifact of p.
	SaveImage(ctx context.Context, p governance.Principal, computerID, filename string, png []byte) (artifact.Ref, error)
}

// seconds is d in the whole seconds requests, keys and views count in.
func seconds(d time.Duration) int { return int(d / time.Second) }

// Manager runs computers for principals.
type Manager struct {
	cfg      Config
	driver   sandbox.Driver
	st       store.Store
	gov      *governance.Service
	instance string
	now      func() time.Time

	adm      admission
	pools    []*pool // the default template's first, then TemplatePools' by name
	cleaner  *cleaner
	metrics  metrics
	starting atomic.Int64     // creations in flight
	renewed  atomic.Int64     // the last successful heartbeat, Unix nanoseconds (fleet.go)
	ports    portConns        // open port connections per computer (ports.go)
	terms    terminalRegistry // terminal sessions (termsessions.go)

	mu    sync.Mutex
	live  map[string]*live
	stops heldStops
	// pausedBusy are paused computers being resumed or deleted (under mu).
	pausedBusy map[string]bool
	// volUsers are the running computers' claims on volumes, by volume id;
	// volDeleting the volumes being deleted (under mu).
	volUsers    map[string][]*volClaim
	volDeleting map[string]bool

	stop      chan struct{}
	closeOnce sync.Once
	bg        sync.WaitGroup
}

// live is a running computer owned by this server.
type live struct {
	sb        sandbox.Sandbox
	rec       store.Computer
	principal governance.Principal
	memory    int64
	execLimit time.Duration
	internet  bool          // it was given internet (Spec.Network)
	cut       bool          // under Manager.mu: its internet was taken away (recheckInternet)
	stopping  bool          // under Manager.mu: someone is tearing it down
	killed    bool          // under Manager.mu: its processes are dead and its stop recorded
	retryAt   time.Time     // under Manager.mu: a failed teardown is retried then
	reason    string        // under Manager.mu: why a teardown was started
	failure   string        // under Manager.mu: why it failed (its agent died), "" otherwise
	ended     chan struct{} // closed when it leaves Manager.live
	// idle ends it that long after its last call (0: never);
	// lastActive is that call (under Manager.mu; lifetime.go).
	idle       time.Duration
	lastActive time.Time
	calls      int // calls in flight (busy)
	// idleReason is the stop reason when idle ends it ("": ReasonIdle);
	// tasksWatched: a watcher holds it for its shell tasks, and
	// tasksRecheck: a hold came in since that watcher's last listing
	// (under Manager.mu; hold.go).
	idleReason   string
	tasksWatched bool
	tasksRecheck bool
	// pauseAtEnd pauses it, rather than deleting it, when its lifetime
	// or idle time ends (on_expire "pause").
	pauseAtEnd bool
	// python: a session kernel ran the user's cells (under Manager.mu);
	// a pause keeps its variables.
	python bool
	// vols is its claim on the volumes it mounts (nil: none).
	vols *volClaim
}

// New returns a manager; call Start before use and Close at the end.
func New(cfg Config, driver sandbox.Driver, st store.Store, gov *governance.Service) *Manager {
	m := &Manager{cfg: cfg, driver: driver, st: st, gov: gov, instance: governance.NewID("srv"),
		now: time.Now, live: map[string]*live{}, pausedBusy: map[string]bool{},
		volUsers: map[string][]*volClaim{}, volDeleting: map[string]bool{}, stop: make(chan struct{}), cleaner: newCleaner()}
	m.adm = admission{maxCount: cfg.MaxConcurrent, maxMemory: cfg.MemoryBudget}
	if cfg.Disabled || cfg.Internet.Only {
		cfg.PoolSize = 0 // pool computers have no internet
	}
	m.pools = []*pool{newPool(driver, m.spec(cfg.Memory, cfg.ExecTimeout), cfg.PoolSize, "")}
	for _, name := range slices.Sorted(maps.Keys(cfg.TemplatePools)) {
		if size := cfg.TemplatePools[name]; size > 0 && !cfg.Disabled && !cfg.Internet.Only {
			m.pools = append(m.pools, newPool(driver, m.spec(cfg.Memory, cfg.ExecTimeout), size, name))
		}
	}
	return m
}

func (m *Manager) spec(memory int64, execTimeout time.Duration) sandbox.Spec {
	s := sandbox.DefaultSpec()
	s.MemoryBytes, s.Pids, s.CPUs, s.DiskBytes = memory, m.cfg.Pids, m.cfg.CPUs, m.cfg.Disk
	s.Timeout = execTimeout
	return s
}

// Start recovers from a crashed predecessor, then starts the reaper and the
// warm pool.
func (m *Manager) Start(ctx context.Context) error {
	if err := m.recover(ctx); err != nil {
		return err
	}
	if err := m.beat(ctx, m.now()); err != nil {
		return fmt.Errorf("record instance: %w", err)
	}
	if err := m.poolRoots(ctx); err != nil {
		return err
	}
	m.bg.Add(1)
	go m.reap(context.WithoutCancel(ctx))
	for _, pl := range m.pools {
		pl.start(context.WithoutCancel(ctx))
	}
	return nil
}

// Close destroys every computer this server runs (recording their usage)
// and the pool, and waits for their cleanup until ctx ends; what is left
// then is removed by the next start's GC. A second call only waits.
func (m *Manager) Close(ctx context.Context) {
	m.closeOnce.Do(func() { m.shutdown(ctx) })
	if n, err := m.cleaner.wait(ctx); err != nil {
		log.From(ctx).WarnContext(ctx, "shutting down: computer cleanups unfinished; the next start removes what is left", "pending", n, "err", err)
	}
	if c, ok := m.driver.(sandbox.Closer); ok {
		if err := c.Close(ctx); err != nil {
			log.From(ctx).WarnContext(ctx, "shutting down: the driver did not finish", "err", err)
		}
	}
	if n := m.retryStops(ctx); n > 0 {
		log.From(ctx).ErrorContext(ctx, "shutting down: computer stops not recorded (the disk is full); the next start charges them up to the last heartbeat", "stops", n)
	}
	m.gov.CloseAudit(ctx)
}

// shutdown stops the reaper and the pool and destroys every live computer.
func (m *Manager) shutdown(ctx context.Context) {
	close(m.stop)
	m.bg.Wait()
	for _, pl := range m.pools {
		pl.close(ctx)
	}
	m.mu.Lock()
	all := make([]*live, 0, len(m.live))
	for _, l := range m.live {
		if !l.stopping {
			l.stopping = true
			all = append(all, l)
		}
	}
	m.mu.Unlock()
	for _, l := range all {
		m.destroy(ctx, l, "shutdown")
	}
}

// CreateRequest asks for a computer; zero values take the key's and the
// deployment's limits.
type CreateRequest struct {
	MemoryMB int64
	// Lifetime and ExecTimeout count in whole seconds (a fraction is
	// dropped); larger than the key's or the deployment's, they are clamped.
	Lifetime    time.Duration
	ExecTimeout time.Duration
	Metadata    map[string]string
	// NetworkPolicy asks for internet (nil: loopback only).
	NetworkPolicy *NetworkPolicy
	ResponseID    string // set by the gateway
	// Mounts are host directories bind-mounted into the computer (set by
	// the Jupyter API from the operator's allowed roots, never by clients).
	Mounts []sandbox.Mount
	// Template names the template the computer is made from ("": the
	// deployment's default).
	Template string
	// IdleTimeout ends the computer that long after the last call on it
	// (whole seconds; 0: never), within its lifetime.
	IdleTimeout time.Duration
	// Name is a label of the client's (OpenAI's container name), at most
	// 256 characters.
	Name string
	// OnExpire is what the end of its lifetime or idle time does:
	// OnExpireDelete ("" too) or OnExpirePause.
	OnExpire string
	// Volumes are the organisation's volumes mounted into it.
	Volumes []VolumeRequest
	// NoPool starts a computer of its own rather than claiming a pool one,
	// whose warm session kernel would hold memory the caller's own kernel
	// needs.
	NoPool bool
}

// validate checks a request; its sentences name the REST API's fields.
func (r CreateRequest) validate() error {
	switch {
	case r.MemoryMB < 0:
		return fmt.Errorf("%w: memory_mb must not be negative", ErrInvalid)
	case seconds(r.Lifetime) < 0:
		return fmt.Errorf("%w: lifetime_seconds must not be negative", ErrInvalid)
	case seconds(r.ExecTimeout) < 0:
		return fmt.Errorf("%w: exec_timeout_seconds must not be negative", ErrInvalid)
	case seconds(r.IdleTimeout) < 0:
		return fieldError("idle_timeout_seconds", "must not be negative")
	case r.OnExpire != "" && r.OnExpire != OnExpireDelete && r.OnExpire != OnExpirePause:
		return fieldError("on_expire", `must be "delete" or "pause"`)
	case len(r.Name) > 256 || strings.ContainsAny(r.Name, "\x00"):
		return fieldError("name", "is at most 256 characters, without NUL")
	case len(r.Metadata) > 16:
		return fmt.Errorf("%w: metadata holds at most 16 keys", ErrInvalid)
	}
	for k, v := range r.Metadata {
		if len(k) > 64 || len(v) > 512 {
			return fmt.Errorf("%w: metadata keys are at most 64 characters and values 512", ErrInvalid)
		}
	}
	return checkVolumes(r.Volumes)
}

// errDisabled refuses every new computer of a deployment that runs none.
var errDisabled = fmt.Errorf("%w: this deployment does not run computers (computers.enabled = false)", ErrForbidden)

// allowed checks the organisation and the key.
func allowed(p governance.Principal) error {
	if !p.Org.AllowComputer {
		return fmt.Errorf("%w: the organisation does not allow computers", ErrForbidden)
	}
	if !p.Caps.HasComputer() {
		return fmt.Errorf("%w: the key lacks the computer capability", ErrForbidden)
	}
	return nil
}

// Create starts a computer for p. Requested limits are clamped to the key's
// and the deployment's, never rejected for being too large.
func (m *Manager) Create(ctx context.Context, p governance.Principal, req CreateRequest) (View, error) {
	if m.cfg.Disabled {
		return View{}, errDisabled
	}
	if err := allowed(p); err != nil {
		return View{}, err
	}
	if err := m.gate(ctx, p, ""); err != nil {
		return View{}, err
	}
	if err := req.validate(); err != nil {
		return View{}, err
	}
	pl, err := m.plan(ctx, p, req)
	if err != nil {
		return View{}, err
	}
	memory, spec := pl.memory, pl.spec
	claim, err := m.claimVolumes(spec.Volumes)
	if err != nil {
		return View{}, err
	}
	if err := m.adm.admit(ctx, memory); err != nil {
		m.releaseVolumes(claim)
		return View{}, err
	}
	m.starting.Add(1)
	defer m.starting.Add(-1)
	created := m.now()
	sb := (sandbox.Sandbox)(nil)
	if !req.NoPool && len(spec.Mounts) == 0 && len(spec.Volumes) == 0 {
		sb = m.claimPooled(ctx, spec)
	}
	if sb == nil {
		var err error
		sb, err = m.driver.Create(ctx, spec)
		if err != nil {
			m.adm.release(memory, false)
			m.releaseVolumes(claim)
			return View{}, fmt.Errorf("start computer: %w",
				store.FullFor(fmt.Sprintf("no room for another computer's %d MiB disk", spec.DiskBytes>>20), err))
		}
	}
	ready := m.now()
	meta, _ := json.Marshal(req.Metadata)
	rec := store.Computer{ID: sb.ID(), OrgID: p.Org.ID, KeyID: p.Key.ID, Status: store.StatusReady,
		CreatedAt: created, ReadyAt: &ready, ExpiresAt: ready.Add(time.Duration(pl.lifetime) * time.Second),
		Limits: pl.limits(req), Metadata: meta, ResponseID: req.ResponseID, Instance: m.instance}
	if err := m.st.Computers().Create(ctx, rec); err != nil {
		sb.Destroy(context.WithoutCancel(ctx))
		m.adm.release(memory, false)
		m.releaseVolumes(claim)
		return View{}, fmt.Errorf("record computer: %w", err)
	}
	m.adopt(ctx, p, sb, rec, pl, req, claim)
	m.gov.Record(ctx, p, "computer.created", rec.ID, map[string]any{"memory_mb": memory >> 20, "lifetime_seconds": pl.lifetime})
	if pl.withheld != nil {
		m.gov.Record(ctx, p, AuditInternetWithheld, rec.ID, pl.withheld.Audit())
	}
	log.From(ctx).InfoContext(ctx, "computer created", "computer", rec.ID, "ms", ready.Sub(created).Milliseconds())
	v := viewOf(rec)
	v.LastActiveAt = &ready
	return v, nil
}

// plan is a computer about to start: its spec, and what is recorded of it.
type plan struct {
	spec      sandbox.Spec
	memory    int64
	lifetime  int // seconds
	execLimit time.Duration
	tmpl      string
	withheld  *governance.Refusal // internet the policy withheld
}

// plan works out the computer req asks p for: limits clamped to the key's
// and the deployment's, its template and its network.
func (m *Manager) plan(ctx context.Context, p governance.Principal, req CreateRequest) (plan, error) {
	tmpl, from := m.templateName(p, req)
	root, t, err := m.root(ctx, tmpl, from)
	if err != nil {
		return plan{}, err
	}
	rootEnv := t.Defaults.Env
	req = withTemplateDefaults(req, t.Computer)
	network, internet, err := m.internet(p, req.NetworkPolicy)
	if err != nil && req.NetworkPolicy != nil && req.NetworkPolicy.fromTemplate {
		// The template's policy goes only as far as the deployment,
		// organisation and key let internet reach: else as if none.
		log.From(ctx).DebugContext(ctx, "the template's network policy is not applied", "template", tmpl, "err", err)
		req.NetworkPolicy = nil
		network, internet, err = m.internet(p, nil)
	}
	if err != nil {
		return plan{}, err
	}
	network, internet, withheld := m.withhold(p, network, internet)
	if network == sandbox.NetworkInternet {
		org, err := m.orgSecrets(ctx, p.Org.ID)
		if err != nil {
			return plan{}, err
		}
		internet = withOrgSecrets(internet, org)
	}
	var keyLimits governance.ComputerLimits
	if p.Caps.Computer != nil {
		keyLimits = *p.Caps.Computer
	}
	lifetime := governance.Clamp(seconds(m.cfg.Lifetime), keyLimits.LifetimeSeconds, seconds(req.Lifetime))
	execLimit := tools.CapSeconds(m.cfg.ExecTimeout, keyLimits.ExecTimeoutSeconds, seconds(req.ExecTimeout))
	memory := m.cfg.Memory
	if req.MemoryMB > 0 && req.MemoryMB < memory>>20 {
		memory = max(req.MemoryMB<<20, 32<<20)
	}
	spec := m.spec(memory, execLimit)
	spec.Mounts = req.Mounts
	spec.Root, spec.Env = root, rootEnv
	spec.Network, spec.Internet = network, internet
	spec.Owner = sandbox.Owner{Org: p.Org.ID, Key: p.Key.ID}
	if spec.Volumes, err = m.volumeMounts(ctx, p, req.Volumes); err != nil {
		return plan{}, err
	}
	return plan{spec: spec, memory: memory, lifetime: lifetime, execLimit: execLimit, tmpl: tmpl, withheld: withheld}, nil
}

// limits is what the store records of the plan's limits.
func (pl plan) limits(req CreateRequest) json.RawMessage {
	b, _ := json.Marshal(storedLimits{MemoryMB: pl.memory >> 20, CPUs: pl.spec.CPUs, Pids: pl.spec.Pids,
		DiskMB: pl.spec.DiskBytes >> 20, LifetimeSeconds: pl.lifetime, ExecTimeoutSeconds: seconds(pl.execLimit),
		NetworkPolicy: effective(pl.spec.Network, pl.spec.Internet), Template: pl.tmpl,
		IdleTimeoutSeconds: seconds(req.IdleTimeout), Name: req.Name, OnExpire: req.OnExpire, Volumes: req.Volumes})
	return b
}

// adopt makes sb, recorded as rec, a live computer of this server.
func (m *Manager) adopt(ctx context.Context, p governance.Principal, sb sandbox.Sandbox, rec store.Computer, pl plan, req CreateRequest, claim *volClaim) *live {
	l := &live{sb: sb, rec: rec, principal: p, memory: pl.memory, execLimit: pl.execLimit, ended: make(chan struct{}),
		internet: pl.spec.Network == sandbox.NetworkInternet, idle: time.Duration(seconds(req.IdleTimeout)) * time.Second,
		lastActive: *rec.ReadyAt, pauseAtEnd: req.OnExpire == OnExpirePause, vols: claim}
	m.mu.Lock()
	if claim != nil {
		claim.computer = rec.ID
	}
	m.live[rec.ID] = l
	m.mu.Unlock()
	go m.watch(context.WithoutCancel(ctx), l)
	return l
}

// Get returns a computer of p's organisation.
func (m *Manager) Get(ctx context.Context, p governance.Principal, id string) (View, error) {
	if err := allowed(p); err != nil {
		return View{}, err
	}
	if err := m.gate(ctx, p, id); err != nil {
		return View{}, err
	}
	return m.liveView(ctx, p, id)
}

// get is Get once p was allowed and gated.
func (m *Manager) get(ctx context.Context, p governance.Principal, id string) (View, error) {
	rec, err := m.st.Computers().Get(ctx, p.Org.ID, id)
	if errors.Is(err, store.ErrNotFound) {
		return View{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return View{}, err
	}
	return viewOf(rec), nil
}

// List lists p's organisation's computers.
func (m *Manager) List(ctx context.Context, p governance.Principal, all bool, responseID string) ([]View, error) {
	return m.ListPage(ctx, p, ListQuery{All: all, ResponseID: responseID})
}

// ListQuery selects computers to list, and one page of them (see
// store.ComputerFilter): oldest first, or newest with Desc, after the
// computer After, at most Limit (0: all).
type ListQuery struct {
	All        bool // stopped ones too
	ResponseID string
	After      string
	Desc       bool
	Limit      int
}

// ListPage lists one page of p's organisation's computers, read as one
// page from the store.
func (m *Manager) ListPage(ctx context.Context, p governance.Principal, q ListQuery) ([]View, error) {
	if err := allowed(p); err != nil {
		return nil, err
	}
	if err := m.gate(ctx, p, ""); err != nil {
		return nil, err
	}
	recs, err := m.st.Computers().List(ctx, store.ComputerFilter{OrgID: p.Org.ID, AliveOnly: !q.All, ResponseID: q.ResponseID,
		After: q.After, Desc: q.Desc, Limit: q.Limit})
	if q.After != "" && errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrCursor, q.After)
	}
	if err != nil {
		return nil, err
	}
	out := make([]View, 0, len(recs))
	for _, r := range recs {
		out = append(out, m.withLastCall(viewOf(r)))
	}
	return out, nil
}

// Delete destroys a computer of p's organisation.
func (m *Manager) Delete(ctx context.Context, p governance.Principal, id string) error {
	if err := allowed(p); err != nil {
		return err
	}
	rec, err := m.st.Computers().Get(ctx, p.Org.ID, id)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return err
	}
	if store.Stopped(rec.Status) {
		return goneError(id, rec.Failure)
	}
	if rec.Status == store.StatusPaused {
		m.gov.Record(ctx, p, "computer.destroy_requested", id, nil)
		return m.deletePaused(context.WithoutCancel(ctx), rec, "deleted")
	}
	l := m.lookup(id)
	if l == nil {
		m.gov.Record(ctx, p, "computer.destroy_requested", id, nil)
		return fmt.Errorf("%w: %s is not running on this server; it will be cleaned up", ErrUnavailable, id)
	}
	if !m.claim(l) {
		return m.goneError(l)
	}
	m.gov.Record(ctx, p, "computer.destroy_requested", id, nil)
	if err := m.destroy(context.WithoutCancel(ctx), l, "deleted"); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return nil
}

// gone reports whether l is being torn down or already dead (under
// Manager.mu): its user sees it as gone.
func (l *live) gone() bool { return l.stopping || l.killed }

func (m *Manager) lookup(id string) *live {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.live[id]
}

// CheckRunning returns the error an operation on computer id would fail
// with right now (nil when p may use it), so a transport can answer it
// before it commits to a streamed response.
func (m *Manager) CheckRunning(ctx context.Context, p governance.Principal, id string) error {
	_, err := m.running(ctx, p, id)
	return err
}

// WithSandbox runs fn with the sandbox of a running computer of p's
// organisation, for services that move data in (the gateway copying a
// request's input files).
func (m *Manager) WithSandbox(ctx context.Context, p governance.Principal, id string, fn func(sandbox.Sandbox) error) error {
	l, err := m.running(ctx, p, id)
	if err != nil {
		return err
	}
	defer m.busy(l)()
	return fn(l.sb)
}

// claim makes the caller the one who tears l down; false if another is.
func (m *Manager) claim(l *live) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l.stopping {
		return false
	}
	l.stopping = true
	return true
}

// running returns a live computer of p's organisation, or the error the
// caller should see.
func (m *Manager) running(ctx context.Context, p governance.Principal, id string) (*live, error) {
	if err := allowed(p); err != nil {
		return nil, err
	}
	if err := m.gate(ctx, p, id); err != nil {
		return nil, err
	}
	if l := m.lookup(id); l != nil && l.rec.OrgID == p.Org.ID {
		m.mu.Lock()
		gone := l.gone()
		m.mu.Unlock()
		if gone {
			return nil, m.goneError(l)
		}
		if err := m.withholdRunning(ctx, p, l); err != nil {
			return nil, err
		}
		m.touch(l)
		return l, nil
	}
	v, err := m.get(ctx, p, id)
	if err != nil {
		return nil, err
	}
	if v.Status == store.StatusPaused {
		return nil, fmt.Errorf("%w: resume %s first (POST /v1/computers/%s/resume)", ErrPaused, id, id)
	}
	return nil, goneError(id, v.Failure)
}
