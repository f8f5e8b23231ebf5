package computer

import (
	"context"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/log"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// Fleet is how this server shares its store with other replicas
// (docs/fleet.md).
type Fleet struct {
	// Shared says other servers may run on the store (PostgreSQL). False:
	// this server is the store's only one (SQLite, which its data
	// directory's lock guarantees), so at start every computer not
	// stopped was a previous server's, and is stopped at once.
	Shared bool
	// URL is where the other replicas reach this server, to forward the
	// requests for its computers ("": it advertises none).
	URL string
	// Lease is how long an instance counts as alive after its last
	// heartbeat (0: DefaultLease); it beats every third of it. With
	// Shared, another replica's running computers are marked failed
	// once its lease lapsed.
	Lease time.Duration
	// Sweep, when set, is called at each beat on a shared store with the
	// time before which a replica's last beat means it is dead: what it
	// left besides computers (the gateway's background responses) is
	// ended there.
	Sweep func(ctx context.Context, before time.Time)
}

// DefaultLease is cluster.lease_seconds' default.
const DefaultLease = 15 * time.Second

// FailureServerStopped is the failure of a computer whose server's
// lease lapsed (it crashed or lost its database), recorded by another
// replica; ReasonServerStopped is its stop's reason.
// FailureLeaseLost is the failure a server records for its own
// computers when it fenced itself.
const (
	FailureServerStopped = "its server stopped"
	FailureLeaseLost     = "its server lost its lease (its heartbeats failed or came too late)"
	ReasonServerStopped  = "server_stopped"
)

// lease is the instance lease of this deployment.
func (m *Manager) lease() time.Duration {
	if m.cfg.Fleet.Lease > 0 {
		return m.cfg.Fleet.Lease
	}
	return DefaultLease
}

// beatEvery is how often this server renews its lease: three beats can
// be missed (a slow database) before it lapses.
func (m *Manager) beatEvery() time.Duration { return m.lease() / 3 }

// Instance is this server's instance id, the owner recorded on the
// computers it runs.
func (m *Manager) Instance() string { return m.instance }

// PoolSpec is the spec of a computer created with the deployment's
// defaults, which a driver that keeps its own warm pool
// (internal/sandbox/kube) pools.
func (m *Manager) PoolSpec() sandbox.Spec { return m.spec(m.cfg.Memory, m.cfg.ExecTimeout) }

// Local reports whether computer id runs on this server.
func (m *Manager) Local(id string) bool { return m.lookup(id) != nil }

// beat renews this server's lease (advertising its URL).
func (m *Manager) beat(ctx context.Context, now time.Time) error {
	err := m.st.Instances().Advertise(ctx, m.instance, m.cfg.Fleet.URL, now)
	if err == nil {
		m.renewed.Store(now.UnixNano())
	}
	return err
}

// renew beats and, on a shared store, sweeps the replicas whose lease
// lapsed. When this one's own lapsed, the others may have marked its
// computers failed: while its beats fail it fences (ends them all); when
// a beat comes too late (the database or this process stalled) it ends
// those whose records say they stopped.
func (m *Manager) renew(ctx context.Context, now time.Time) {
	prev := time.Unix(0, m.renewed.Load())
	if err := m.beat(ctx, now); err != nil {
		log.From(ctx).WarnContext(ctx, "heartbeat", "err", err)
		if m.cfg.Fleet.Shared && m.now().Sub(prev) > m.lease() {
			m.fence(ctx, nil)
		}
		return
	}
	if !m.cfg.Fleet.Shared {
		return
	}
	if m.now().Sub(prev) > m.lease() {
		m.fence(ctx, m.stoppedElsewhere)
	}
	m.sweepLapsed(ctx)
	if m.cfg.Fleet.Sweep != nil {
		m.cfg.Fleet.Sweep(ctx, now.Add(-m.lease()))
	}
}

// stoppedElsewhere reports whether the record of a computer this server
// runs says it stopped (another replica recorded its stop).
func (m *Manager) stoppedElsewhere(ctx context.Context, rec store.Computer) bool {
	r, err := m.st.Computers().Get(ctx, rec.OrgID, rec.ID)
	return err == nil && store.Stopped(r.Status)
}

// fence ends the computers of this server (those for which only says so;
// nil: all) once its lease lapsed, as the other replicas are marking them
// failed: none runs on uncharged. Their stops are held until the database
// answers, and conflict (are no-ops) where another replica recorded them
// first.
func (m *Manager) fence(ctx context.Context, only func(context.Context, store.Computer) bool) {
	m.mu.Lock()
	var cands []*live
	for _, l := range m.live {
		if !l.stopping {
			cands = append(cands, l)
		}
	}
	m.mu.Unlock()
	var all []*live
	for _, l := range cands {
		if only != nil && !only(ctx, l.rec) {
			continue
		}
		m.mu.Lock()
		if !l.stopping {
			l.stopping = true
			l.failure = FailureLeaseLost
			all = append(all, l)
		}
		m.mu.Unlock()
	}
	if len(all) > 0 {
		log.From(ctx).ErrorContext(ctx, "this server's lease lapsed: ending its computers", "count", len(all))
	}
	for _, l := range all {
		m.destroy(ctx, l, ReasonServerStopped)
	}
}

// sweepLapsed marks failed the running computers of the instances whose
// lease lapsed (their agents died with their server, or cannot be reached
// from here), each stop recorded once whichever replica gets there first
// (Computers.Stop's ErrConflict for the others). Paused computers are
// left: nothing of them runs.
func (m *Manager) sweepLapsed(ctx context.Context) {
	now := m.now()
	lapsed, err := m.st.Instances().Lapsed(ctx, now.Add(-m.lease()))
	if err != nil {
		log.From(ctx).WarnContext(ctx, "list lapsed servers", "err", err)
		return
	}
	if len(lapsed) == 0 {
		return
	}
	dead := make(map[string]store.Instance, len(lapsed))
	for _, in := range lapsed {
		if in.ID != m.instance {
			dead[in.ID] = in
		}
	}
	recs, err := m.st.Computers().Alive(ctx)
	if err != nil {
		log.From(ctx).WarnContext(ctx, "list the computers of lapsed servers", "err", err)
		return
	}
	n := 0
	for _, rec := range recs {
		in, ok := dead[rec.Instance]
		if !ok || rec.Status == store.StatusPaused {
			continue
		}
		at := in.LastSeen.Add(m.beatEvery())
		if at.After(now) {
			at = now
		}
		m.recordStop(ctx, rec, store.Stop{At: at, Reason: ReasonServerStopped, Failure: FailureServerStopped})
		n++
	}
	if n > 0 {
		log.From(ctx).WarnContext(ctx, "marked failed the computers of servers whose lease lapsed", "count", n, "servers", len(dead))
	}
}

// othersLive reports whether instance is another server whose lease
// holds (its paused computers are its to end); cache keeps the answers of
// one sweep.
func (m *Manager) othersLive(ctx context.Context, instance string, cache map[string]bool) bool {
	if !m.cfg.Fleet.Shared || instance == m.instance {
		return false
	}
	if v, ok := cache[instance]; ok {
		return v
	}
	last, err := m.st.Instances().LastSeen(ctx, instance)
	v := err == nil && last.After(m.now().Add(-m.lease()))
	cache[instance] = v
	return v
}
