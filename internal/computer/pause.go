package computer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/log"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// What the end of a computer's lifetime or idle time does to it.
const (
	OnExpireDelete = "delete"
	OnExpirePause  = "pause"
)

// Stop reasons of pauses and of paused computers' ends.
const (
	ReasonRequested     = "requested"      // POST .../pause
	ReasonPausedExpired = "paused_expired" // kept paused longer than Config.PausedMax
)

// DefaultPausedMax is how long a paused computer is kept when the
// deployment sets nothing (computers.paused_max_seconds).
const DefaultPausedMax = 7 * 24 * time.Hour

// pausedSweepEvery is how often the reaper looks for paused computers
// kept too long.
const pausedSweepEvery = 30 * time.Second

var (
	// ErrNotPaused: a resume of a computer that is not paused.
	ErrNotPaused = errdefs.New(errdefs.Conflict, "computer_not_paused", "the computer is not paused")
	// ErrNotPausable: a pause of a computer whose host mounts could not be
	// given back at its resume.
	ErrNotPausable = errdefs.New(errdefs.Conflict, "computer_not_pausable", "the computer cannot be paused")
	// ErrPaused: a call on a paused computer.
	ErrPaused = errdefs.New(errdefs.Conflict, "computer_paused", "the computer is paused")
	// errCannotPause: a driver that keeps no workspace of a stopped computer.
	errCannotPause = errdefs.New(errdefs.Unavailable, "computer_unavailable", "this host cannot pause computers")
)

// Pause stops a running computer of p's organisation but keeps its
// workspace: its memory, CPU and capacity are freed and no
// sandbox_seconds are charged until it is resumed. Its processes and its
// Python kernel's state are gone.
func (m *Manager) Pause(ctx context.Context, p governance.Principal, id string) (View, error) {
	l, err := m.running(ctx, p, id)
	if err != nil {
		return View{}, err
	}
	if !m.pausable(l) {
		return View{}, m.lacks(errCannotPause, "cannot pause computers")
	}
	if len(l.sb.Spec().Mounts) > 0 {
		return View{}, fmt.Errorf("%w: %s has host directories mounted (a Kernel Gateway computer); it cannot be paused", ErrNotPausable, id)
	}
	if !m.claim(l) {
		return View{}, m.goneError(l)
	}
	vars, err := m.pause(context.WithoutCancel(ctx), l, ReasonRequested)
	if err != nil {
		return View{}, err
	}
	v, err := m.get(ctx, p, id)
	v.Python = vars
	return v, err
}

// pause stops l, claimed, keeping its workspace (and its session
// kernel's variables, which it reports), and records the pause; a
// computer that cannot be paused is destroyed instead, failed, saying
// why.
func (m *Manager) pause(ctx context.Context, l *live, reason string) (*PythonVariables, error) {
	m.mu.Lock()
	python := l.python
	m.mu.Unlock()
	var vars *PythonVariables
	if python {
		vars = m.runStateCell(ctx, l.sb, pythonSaveCell)
	}
	at := m.now()
	err := l.sb.(sandbox.Pauser).Pause(ctx)
	if err != nil {
		log.From(ctx).ErrorContext(ctx, "pause computer", "computer", l.rec.ID, "err", err)
		m.mu.Lock()
		l.failure = fmt.Sprintf("its workspace could not be kept when it was paused (%v)", err)
		m.mu.Unlock()
		m.destroy(ctx, l, "pause_failed")
		return nil, fmt.Errorf("%w: pause %s: %v", ErrUnavailable, l.rec.ID, err)
	}
	m.mu.Lock()
	l.killed = true
	m.mu.Unlock()
	m.forget(l, false)
	s := store.Stop{ComputerID: l.rec.ID, At: at, Reason: reason, Seconds: chargedSeconds(l.rec, at)}
	m.gov.FlushAudit()
	if err := m.st.Computers().Pause(ctx, s); err != nil {
		// Its workspace is kept; the record still says ready, so the
		// next start's recovery charges it up to then and ends it.
		log.From(ctx).ErrorContext(ctx, "record computer pause", "computer", l.rec.ID, "err", err)
		return nil, fmt.Errorf("%w: record the pause of %s: %v", ErrUnavailable, l.rec.ID, err)
	}
	log.From(ctx).InfoContext(ctx, "computer paused", "computer", l.rec.ID, "reason", reason)
	return vars, nil
}

// Resume starts a paused computer of p's organisation again: the same id,
// its workspace exactly as it was paused, its limits as recorded (within
// the key's and the deployment's caps as they are now), a new lifetime
// from now.
func (m *Manager) Resume(ctx context.Context, p governance.Principal, id string) (View, error) {
	if m.cfg.Disabled {
		return View{}, errDisabled
	}
	if err := allowed(p); err != nil {
		return View{}, err
	}
	if err := m.gate(ctx, p, id); err != nil {
		return View{}, err
	}
	resumer, ok := m.driver.(sandbox.Resumer)
	if !ok {
		return View{}, m.lacks(errCannotPause, "cannot pause computers")
	}
	// The record first: another organisation's computer is not found, a
	// running or stopped one is said so, before the hold can tell that a
	// computer of that id lives here.
	if _, err := m.pausedRecord(ctx, p, id); err != nil {
		return View{}, err
	}
	if !m.holdPaused(id) {
		return View{}, fmt.Errorf("%w: %s is being resumed or deleted", ErrNotPaused, id)
	}
	defer m.releasePaused(id)
	rec, err := m.pausedRecord(ctx, p, id) // again, held: what a racing resume or delete left
	if err != nil {
		return View{}, err
	}
	req := requestOf(viewOf(rec))
	pl, err := m.plan(ctx, p, req)
	if err != nil {
		return View{}, err
	}
	claim, err := m.claimVolumes(pl.spec.Volumes)
	if err != nil {
		return View{}, fmt.Errorf("%w (it stays paused)", err)
	}
	if err := m.adm.admit(ctx, pl.memory); err != nil {
		m.releaseVolumes(claim)
		return View{}, err
	}
	m.starting.Add(1)
	defer m.starting.Add(-1)
	sb, err := resumer.Resume(ctx, id, pl.spec)
	if err != nil {
		m.releaseVolumes(claim)
	}
	if errors.Is(err, sandbox.ErrNoPaused) {
		m.adm.release(pl.memory, false)
		failure := "its paused workspace is no longer on this host"
		m.recordStop(ctx, rec, store.Stop{At: m.now(), Reason: "resume_failed", Failure: failure})
		return View{}, goneError(id, failure)
	}
	if err != nil {
		m.adm.release(pl.memory, false)
		return View{}, fmt.Errorf("resume computer (it stays paused): %w",
			store.FullFor(fmt.Sprintf("no room to resume a computer with a %d MiB disk", pl.spec.DiskBytes>>20), err))
	}
	ready := m.now()
	expires := ready.Add(time.Duration(pl.lifetime) * time.Second)
	if err := m.st.Computers().Resume(ctx, id, ready, m.instance, expires); err != nil {
		if perr := sb.(sandbox.Pauser).Pause(context.WithoutCancel(ctx)); perr != nil {
			log.From(ctx).ErrorContext(ctx, "pause a computer whose resume was not recorded", "computer", id, "err", perr)
		}
		m.adm.release(pl.memory, false)
		m.releaseVolumes(claim)
		return View{}, fmt.Errorf("record the resume of %s (it stays paused): %w", id, err)
	}
	pausedFor := 0
	if rec.PausedAt != nil {
		pausedFor = seconds(ready.Sub(*rec.PausedAt))
	}
	rec.Status, rec.ReadyAt, rec.ExpiresAt, rec.PausedAt, rec.Instance = store.StatusReady, &ready, expires, nil, m.instance
	var vars *PythonVariables
	if _, err := sb.Stat(ctx, pythonStateFile); err == nil {
		vars = m.runStateCell(ctx, sb, pythonRestoreCell)
	}
	l := m.adopt(ctx, p, sb, rec, pl, req, claim)
	if vars != nil {
		m.mu.Lock()
		l.python = true
		m.mu.Unlock()
	}
	m.gov.Record(ctx, p, "computer.resumed", id, map[string]any{"paused_seconds": pausedFor, "pauses": rec.Pauses})
	log.From(ctx).InfoContext(ctx, "computer resumed", "computer", id, "ms", m.now().Sub(ready).Milliseconds())
	v := viewOf(rec)
	v.LastActiveAt, v.Python = &ready, vars
	return v, nil
}

// pausedRecord returns the record of p's paused computer id, or the error
// a resume of it answers.
func (m *Manager) pausedRecord(ctx context.Context, p governance.Principal, id string) (store.Computer, error) {
	rec, err := m.st.Computers().Get(ctx, p.Org.ID, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Computer{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return store.Computer{}, err
	}
	if store.Stopped(rec.Status) {
		return store.Computer{}, goneError(id, rec.Failure)
	}
	if rec.Status != store.StatusPaused {
		return store.Computer{}, fmt.Errorf("%w: %s is %s", ErrNotPaused, id, rec.Status)
	}
	return rec, nil
}

// requestOf is the request that makes v's computer again (a resume):
// domain secrets given at create are not kept (their values are never
// stored), the organisation's are added again.
func requestOf(v View) CreateRequest {
	req := CreateRequest{MemoryMB: v.Limits.MemoryMB, Lifetime: v.Limits.Lifetime, ExecTimeout: v.Limits.ExecTimeout,
		Metadata: v.Metadata, Template: v.Template, IdleTimeout: v.Limits.IdleTimeout, Name: v.Name,
		OnExpire: v.Limits.OnExpire, Volumes: v.Limits.Volumes, NoPool: true}
	if np := v.Limits.NetworkPolicy; np != nil {
		req.NetworkPolicy = &NetworkPolicy{Type: np.Type, AllowedDomains: np.AllowedDomains, AllowedCIDRs: np.AllowedCIDRs}
	}
	return req
}

// holdPaused makes the caller the only one resuming or deleting paused
// computer id; false if another is.
func (m *Manager) holdPaused(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pausedBusy[id] || m.live[id] != nil {
		return false
	}
	m.pausedBusy[id] = true
	return true
}

func (m *Manager) releasePaused(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.pausedBusy, id)
}

// deletePaused ends paused computer rec for good: its workspace is
// discarded and its stop recorded (no sandbox_seconds: its last running
// period was charged at the pause).
func (m *Manager) deletePaused(ctx context.Context, rec store.Computer, reason string) error {
	if !m.holdPaused(rec.ID) {
		return fmt.Errorf("%w: %s is being resumed or deleted", ErrNotPaused, rec.ID)
	}
	defer m.releasePaused(rec.ID)
	if r, ok := m.driver.(sandbox.Resumer); ok {
		if err := r.DiscardPaused(ctx, rec.ID); err != nil {
			return fmt.Errorf("%w: discard the workspace of %s: %v", ErrUnavailable, rec.ID, err)
		}
	}
	m.recordStop(ctx, rec, store.Stop{At: m.now(), Reason: reason})
	return nil
}

// sweepPaused ends the paused computers kept longer than the deployment
// allows.
func (m *Manager) sweepPaused(ctx context.Context) {
	max := m.cfg.PausedMax
	if max <= 0 {
		max = DefaultPausedMax
	}
	recs, err := m.st.Computers().Alive(ctx)
	if err != nil {
		log.From(ctx).WarnContext(ctx, "list paused computers", "err", err)
		return
	}
	now := m.now()
	others := map[string]bool{}
	for _, rec := range recs {
		if rec.Status == store.StatusPaused && rec.PausedAt != nil && now.Sub(*rec.PausedAt) > max &&
			!m.othersLive(ctx, rec.Instance, others) {
			if err := m.deletePaused(ctx, rec, ReasonPausedExpired); err != nil {
				log.From(ctx).WarnContext(ctx, "end a computer paused too long", "computer", rec.ID, "err", err)
			}
		}
	}
}

// pausable reports whether l's driver can pause it.
func (m *Manager) pausable(l *live) bool {
	_, ok := l.sb.(sandbox.Pauser)
	_, resumable := m.driver.(sandbox.Resumer)
	return ok && resumable
}

// chargedSeconds is a running period of rec up to at, in whole seconds
// rounded up.
func chargedSeconds(rec store.Computer, at time.Time) int64 {
	from := rec.CreatedAt
	if rec.ReadyAt != nil {
		from = *rec.ReadyAt
	}
	if d := at.Sub(from); d > 0 {
		return int64((d + time.Second - 1) / time.Second)
	}
	return 0
}
