package jupyter

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"sort"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/log"
	"github.com/cubicle-sandbox/cubicle/internal/store"
	"github.com/cubicle-sandbox/cubicle/internal/strictjson"
)

// maxStartBody bounds POST /api/kernels (the client's whole environment).
const maxStartBody = 1 << 20

// KernelMetadataKey is the computer metadata key naming its kernel (the
// replicas find a kernel's computer by it, docs/fleet.md).
const KernelMetadataKey = "jupyter_kernel_id"

// newKernelID returns a random UUID (version 4): jupyter_server routes only
// ids of the form \w+-\w+-\w+-\w+-\w+.
func newKernelID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// startRequest is the body of POST /api/kernels. Other fields are
// ignored, as jupyter_server does; path (jupyter_server's) is accepted
// and unused: the working directory is env's KERNEL_WORKING_DIR.
type startRequest struct {
	Name string            `json:"name"`
	Path string            `json:"path"`
	Env  map[string]string `json:"env"`
}

func (s *Server) startKernel(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	var req startRequest
	body, err := io.ReadAll(io.LimitReader(r.Body, maxStartBody+1))
	switch {
	case err != nil:
		return fmt.Errorf("%w: read the body: %v", errBadRequest, err)
	case len(body) > maxStartBody:
		return fmt.Errorf("%w: the body is larger than %d bytes", errBadRequest, maxStartBody)
	case len(body) > 0:
		if err := strictjson.Check(body, reflect.TypeOf(req)); err != nil {
			return fmt.Errorf("%w: %w", errBadRequest, err) // a duplicate key, a known field in another case
		}
		if err := json.Unmarshal(body, &req); err != nil {
			return fmt.Errorf("%w: the body must be {\"name\", \"env\"}: %v", errBadRequest, err)
		}
	}
	if req.Name == "" {
		req.Name = kernelName
	}
	spec, err := s.spec(r.Context(), p, req.Name)
	if err != nil {
		return err
	}
	k, err := s.start(r.Context(), p, spec, req.Env)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/kernels/"+k.id)
	writeJSON(w, http.StatusCreated, k.model())
	return nil
}

// start creates the kernel's computer (limits, admission, lifetime, audit
// and usage as for any computer of p) and opens the relay to a kernel in
// it. A failure leaves no computer behind.
func (s *Server) start(ctx context.Context, p governance.Principal, spec kernelSpec, env map[string]string) (*kernel, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, errClosed
	}
	id := newKernelID()
	env = withoutBreaking(env)
	cwd, view, err := s.createComputer(ctx, p, id, spec.template, env)
	if err != nil {
		return nil, err
	}
	log.Attach(ctx, "kernel", id, "computer", view.ID)
	// ctx bounds the kernel's start only: a client that gives up stops it.
	relay, err := s.mgr.OpenKernel(ctx, p, view.ID, env, cwd)
	if err != nil {
		if derr := s.mgr.Delete(context.WithoutCancel(ctx), p, view.ID); derr != nil && !errors.Is(derr, computer.ErrGone) {
			log.From(ctx).ErrorContext(ctx, "jupyter: delete the computer of a kernel that did not start", "err", derr)
		}
		return nil, err
	}
	k := &kernel{id: id, spec: spec.name, computerID: view.ID, p: p, env: env, cwd: cwd, relay: relay, state: "idle",
		lastActivity: time.Now(), conns: map[*conn]struct{}{}}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.discard(context.WithoutCancel(ctx), k, errClosed.Error())
		return nil, errClosed
	}
	s.kernels[id] = k
	s.pump(k, relay) // under s.mu: Close waits for pumps only once closed is set
	s.mu.Unlock()
	log.From(ctx).InfoContext(ctx, "jupyter: kernel started", "mounted", cwd != "")
	return k, nil
}

// breakingEnv names variables a client sends that would make the kernel
// exit at start: JPY_PARENT_PID (the client's own pid) makes ipykernel
// watch a process that is not its parent and shut down at once.
var breakingEnv = []string{"JPY_PARENT_PID"}

// withoutBreaking returns env without breakingEnv.
func withoutBreaking(env map[string]string) map[string]string {
	out := make(map[string]string, len(env))
	for k, v := range env {
		out[k] = v
	}
	for _, k := range breakingEnv {
		delete(out, k)
	}
	return out
}

// kernelOf is lookup of the kernel of r's path, whose id and computer it
// adds to the request's logger.
func (s *Server) kernelOf(r *http.Request, p governance.Principal) (*kernel, error) {
	k, err := s.lookup(r.Context(), p, r.PathValue("id"))
	if err == nil {
		log.Attach(r.Context(), "kernel", k.id, "computer", k.computerID)
	}
	return k, err
}

// lookup returns a kernel of p's organisation that is still alive: a
// kernel whose computer is gone (lifetime over, deleted through the
// computers API) is removed and reported as not found.
func (s *Server) lookup(ctx context.Context, p governance.Principal, id string) (*kernel, error) {
	s.mu.Lock()
	k := s.kernels[id]
	s.mu.Unlock()
	if k == nil || k.p.Org.ID != p.Org.ID {
		return nil, fmt.Errorf("%w: %.64q", errNoKernel, id)
	}
	if !s.computerAlive(ctx, k) {
		s.remove(context.WithoutCancel(ctx), k, reasonComputerGone)
		return nil, fmt.Errorf("%w: %.64q (its computer is gone)", errNoKernel, id)
	}
	return k, nil
}

// computerAlive says whether the kernel's computer still runs (an error
// reading the store counts as alive: a kernel is not dropped for that).
func (s *Server) computerAlive(ctx context.Context, k *kernel) bool {
	v, err := s.mgr.Get(ctx, k.p, k.computerID)
	if errors.Is(err, computer.ErrNotFound) {
		return false
	}
	return err != nil || !store.Stopped(v.Status)
}

// remove takes a kernel out of the registry, ends it and deletes its
// computer.
func (s *Server) remove(ctx context.Context, k *kernel, reason string) {
	s.mu.Lock()
	if s.kernels[k.id] != k {
		s.mu.Unlock()
		return
	}
	delete(s.kernels, k.id)
	s.mu.Unlock()
	s.discard(ctx, k, reason)
}

func (s *Server) discard(ctx context.Context, k *kernel, reason string) {
	k.shut(ctx, reason)
	err := s.mgr.Delete(ctx, k.p, k.computerID)
	if err != nil && !errors.Is(err, computer.ErrGone) && !errors.Is(err, computer.ErrNotFound) {
		log.From(ctx).ErrorContext(ctx, "jupyter: delete a kernel's computer", "kernel", k.id, "computer", k.computerID, "err", err)
	}
	log.From(ctx).InfoContext(ctx, "jupyter: kernel removed", "kernel", k.id, "computer", k.computerID, "reason", reason)
}

// relayEnded runs when a relay's messages end: when the computer is gone
// the kernel goes too; otherwise the kernel stays, dead, until a restart.
func (s *Server) relayEnded(k *kernel, err error) {
	ctx := k.logContext()
	if s.isClosed() {
		return
	}
	if !s.computerAlive(ctx, k) {
		s.remove(ctx, k, reasonComputerGone)
		return
	}
	log.From(ctx).WarnContext(ctx, "jupyter: kernel relay ended", "err", err)
}

func (s *Server) listKernels(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	var out []model
	for _, k := range s.snapshot() {
		if k.p.Org.ID != p.Org.ID {
			continue
		}
		if _, err := s.lookup(r.Context(), p, k.id); err == nil {
			out = append(out, k.model())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	if out == nil {
		out = []model{}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) getKernel(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	k, err := s.kernelOf(r, p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, k.model())
	return nil
}

func (s *Server) deleteKernel(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	k, err := s.kernelOf(r, p)
	if err != nil {
		return err
	}
	s.remove(context.WithoutCancel(r.Context()), k, "deleted")
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) interruptKernel(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	k, err := s.kernelOf(r, p)
	if err != nil {
		return err
	}
	if err := k.interrupt(r.Context()); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) restartKernel(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	k, err := s.kernelOf(r, p)
	if err != nil {
		return err
	}
	if err := s.restart(context.WithoutCancel(r.Context()), k); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, k.model())
	return nil
}

func (k *kernel) interrupt(ctx context.Context) error {
	k.mu.Lock()
	relay, done := k.relay, k.relayDone
	k.lastActivity = time.Now()
	k.mu.Unlock()
	if done {
		return errDead
	}
	return relayError(relay.Interrupt(ctx))
}

// restart replaces the kernel with a fresh one in the same computer: the
// relay restarts it, or, when the relay has ended (the kernel died for
// good), a new relay is opened.
func (s *Server) restart(ctx context.Context, k *kernel) error {
	k.ops.Lock()
	defer k.ops.Unlock()
	k.mu.Lock()
	relay, done, gone := k.relay, k.relayDone, k.gone
	k.mu.Unlock()
	if gone {
		return fmt.Errorf("%w: %s", errNoKernel, k.id)
	}
	if !done {
		if err := relay.Restart(ctx); err != nil {
			return relayError(err)
		}
		k.mu.Lock()
		k.state, k.lastActivity = "idle", time.Now()
		k.mu.Unlock()
		return nil
	}
	fresh, err := s.mgr.OpenKernel(ctx, k.p, k.computerID, k.env, k.cwd)
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.relay, k.relayDone, k.state, k.lastActivity = fresh, false, "idle", time.Now()
	k.mu.Unlock()
	s.pump(k, fresh)
	return nil
}

// relayError maps a relay's failure to the service's kinds.
func relayError(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %v", computer.ErrUnavailable, err)
}
