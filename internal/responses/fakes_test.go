package responses

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/artifact"
	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/files"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/responses/upstreamtest"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/store"
	"github.com/cubicle-sandbox/cubicle/internal/tools"
)

// fakeComputers is Computers without computers: Create hands out ids,
// RunTool answers from run (default: "ran <name>"), and every call is
// recorded.
type fakeComputers struct {
	mu        sync.Mutex
	disabled  bool
	createErr error
	run       func(ctx context.Context, name string, args json.RawMessage) (tools.Result, error)
	created   []computer.CreateRequest
	ran       []string // name + " " + arguments
	deleted   []string
	held      []string // HoldForTasks
}

func (f *fakeComputers) ToolsEnabled(governance.Principal) bool   { return !f.disabled }
func (f *fakeComputers) ScriptsEnabled(governance.Principal) bool { return !f.disabled }

func (f *fakeComputers) Create(_ context.Context, _ governance.Principal, req computer.CreateRequest) (computer.View, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.createErr != nil {
		return computer.View{}, f.createErr
	}
	f.created = append(f.created, req)
	return computer.View{ID: fmt.Sprintf("cmp_%d", len(f.created))}, nil
}

func (f *fakeComputers) RunTool(ctx context.Context, _ governance.Principal, id string, reg *tools.Registry, name string, args json.RawMessage) (tools.Result, error) {
	if _, ok := reg.Lookup(name); !ok {
		return tools.Result{}, fmt.Errorf("no tool %q", name)
	}
	f.mu.Lock()
	f.ran = append(f.ran, id+" "+name+" "+string(args))
	run := f.run
	f.mu.Unlock()
	if run == nil {
		return tools.Result{Output: "ran " + name}, nil
	}
	return run(ctx, name, args)
}

func (f *fakeComputers) WithSandbox(_ context.Context, _ governance.Principal, _ string, fn func(sandbox.Sandbox) error) error {
	return fn(nil)
}

func (f *fakeComputers) Delete(_ context.Context, _ governance.Principal, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleted = append(f.deleted, id)
	return nil
}

// CheckRunning: every computer this fake made and did not delete runs.
func (f *fakeComputers) WorkspaceFiles(context.Context, governance.Principal, string, int) ([]sandbox.FileInfo, bool, error) {
	return nil, false, nil
}

func (f *fakeComputers) CheckRunning(_ context.Context, _ governance.Principal, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if slices.Contains(f.deleted, id) {
		return computer.ErrGone
	}
	return nil
}

// Use: a kept computer is in use while it runs (CheckRunning).
func (f *fakeComputers) Use(ctx context.Context, p governance.Principal, id string) (func(), error) {
	if err := f.CheckRunning(ctx, p, id); err != nil {
		return nil, err
	}
	return func() {}, nil
}

// HoldForTasks records the hold of a running computer.
func (f *fakeComputers) HoldForTasks(ctx context.Context, p governance.Principal, id string, grace time.Duration) error {
	if err := f.CheckRunning(ctx, p, id); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.held = append(f.held, id)
	return nil
}

func (f *fakeComputers) snapshotHeld() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.held)
}

func (f *fakeComputers) snapshot() (created []computer.CreateRequest, ran, deleted []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append(created, f.created...), append(ran, f.ran...), append(deleted, f.deleted...)
}

// fakeResponses is store.Responses in memory.
type fakeResponses struct {
	mu    sync.Mutex
	byID  map[string]store.Response
	items map[string]json.RawMessage
	// beats are the instances' last beats (Orphaned).
	beats map[string]time.Time
}

func newFakeResponses() *fakeResponses {
	return &fakeResponses{byID: map[string]store.Response{}, items: map[string]json.RawMessage{}}
}

func (s *fakeResponses) Put(_ context.Context, r store.Response) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byID[r.OrgID+"/"+r.ID] = r
	for id, it := range r.Items {
		s.items[r.OrgID+"/"+id] = it
	}
	return nil
}

func (s *fakeResponses) Get(_ context.Context, org, id string) (store.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.byID[org+"/"+id]
	if !ok {
		return store.Response{}, store.ErrNotFound
	}
	return r, nil
}

func (s *fakeResponses) Delete(_ context.Context, org, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.byID[org+"/"+id]; !ok {
		return store.ErrNotFound
	}
	delete(s.byID, org+"/"+id)
	return nil
}

func (s *fakeResponses) List(context.Context, string, string, int, bool) ([]store.Response, error) {
	return nil, errors.New("fakeResponses: List is not used by the gateway")
}

func (s *fakeResponses) Item(_ context.Context, org, id string) (json.RawMessage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	it, ok := s.items[org+"/"+id]
	if !ok {
		return nil, store.ErrNotFound
	}
	return it, nil
}

// fakeFiles is Files in memory: stored files by id, the inputs copied
// into computers and the artifacts kept.
type fakeFiles struct {
	mu        sync.Mutex
	files     map[string][]byte // id → content
	names     map[string]string // id → filename
	copies    []files.InputsRequest
	artifacts map[string][]store.Artifact // computer id → its artifacts
	saved     []string                    // SaveImage filenames
}

func newFakeFiles() *fakeFiles {
	return &fakeFiles{files: map[string][]byte{}, names: map[string]string{}, artifacts: map[string][]store.Artifact{}}
}

func (f *fakeFiles) Upload(_ context.Context, _ governance.Principal, filename, _ string, r io.Reader) (store.File, error) {
	if strings.Contains(filename, "/") {
		return store.File{}, files.ErrInvalidFilename
	}
	data, _ := io.ReadAll(r)
	f.mu.Lock()
	defer f.mu.Unlock()
	id := fmt.Sprintf("file_up%d", len(f.files))
	f.files[id], f.names[id] = data, filename
	return store.File{ID: id, Filename: filename, Bytes: int64(len(data))}, nil
}

func (f *fakeFiles) MaxBytes() int64 { return 1 << 20 }

func (f *fakeFiles) OpenFile(_ context.Context, _ governance.Principal, id string) (store.File, io.ReadCloser, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	data, ok := f.files[id]
	if !ok {
		return store.File{}, nil, store.ErrNotFound
	}
	return store.File{ID: id, Bytes: int64(len(data))}, io.NopCloser(bytes.NewReader(data)), nil
}

func (f *fakeFiles) CopyInputs(_ context.Context, _ governance.Principal, _ sandbox.Files, req files.InputsRequest) (files.InputsReport, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.copies = append(f.copies, req)
	rep := files.InputsReport{}
	for _, id := range req.FileIDs {
		rep.Copied = append(rep.Copied, files.Copied{ID: id, Path: "/workspace/" + f.names[id]})
	}
	for _, id := range req.ArtifactIDs {
		rep.Copied = append(rep.Copied, files.Copied{ID: id, Path: files.ArtifactsDir + "/" + id + ".png"})
	}
	return rep, nil
}

func (f *fakeFiles) SaveImage(_ context.Context, _ governance.Principal, computerID, filename string, png []byte) (artifact.Ref, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if string(png) == "fail" {
		return artifact.Ref{}, errors.New("disk full")
	}
	f.saved = append(f.saved, filename)
	a := store.Artifact{ID: fmt.Sprintf("art_%d", len(f.saved)), ComputerID: computerID, Filename: filename}
	f.artifacts[computerID] = append(f.artifacts[computerID], a)
	return artifact.Ref{ID: a.ID, Filename: filename, Bytes: int64(len(png))}, nil
}

func (f *fakeFiles) ListArtifacts(_ context.Context, _ governance.Principal, computerID, _ string) ([]store.Artifact, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.artifacts[computerID], nil
}

// harness is a gateway on fakes and a scripted upstream.
type harness struct {
	t     *testing.T
	g     *Gateway
	comp  *fakeComputers
	files *fakeFiles
	store *fakeResponses
	up    *upstreamtest.Server
	p     governance.Principal
}

// newHarness wires a gateway to a scripted upstream speaking api; edit
// adjusts the configuration (nil: defaults, with short timeouts).
func newHarness(t *testing.T, api string, step upstreamtest.Step, edit func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t, comp: &fakeComputers{}, files: newFakeFiles(), store: newFakeResponses()}
	h.up = upstreamtest.New(t, api, step)
	cfg := Config{Upstreams: []UpstreamConfig{{Name: "up", BaseURL: h.up.URL, API: api, Default: true}},
		Model: "m", Timeout: 5 * time.Second, IdleTimeout: 2 * time.Second, PublicURL: "https://cubicle.example"}
	if edit != nil {
		edit(&cfg)
	}
	g, err := New(cfg, Deps{Computers: h.comp, Files: h.files, Store: h.store, Instance: "srv_test"})
	if err != nil {
		t.Fatal(err)
	}
	h.g = g
	empty := json.RawMessage("{}")
	h.p = governance.Principal{Org: store.Org{ID: "org_1"}, Key: store.Key{ID: "key_1"},
		Caps: governance.Capabilities{Files: &empty, Artifacts: &empty}}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := g.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	return h
}

// request decodes a request body as the transport does.
func (h *harness) request(body string) *Request {
	h.t.Helper()
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	var req Request
	if err := dec.Decode(&req); err != nil {
		h.t.Fatalf("request %s: %v", body, err)
	}
	return &req
}

// stream runs body streamed (as the transport does: Begin, Do with a
// sender, Close) and returns the response, the events and Do's error.
func (h *harness) stream(ctx context.Context, body string) (*Response, []Event, error) {
	h.t.Helper()
	r, err := h.g.Begin(ctx, h.p, h.request(body))
	if err != nil {
		return nil, nil, err
	}
	defer r.Close(ctx)
	var events []Event
	resp, err := r.Do(ctx, func(ev Event) error {
		events = append(events, ev)
		return nil
	})
	return resp, events, err
}

// create runs body without streaming.
func (h *harness) create(body string) (*Response, error) {
	h.t.Helper()
	return h.g.Create(context.Background(), h.p, h.request(body))
}

// types are the events' types.
func types(events []Event) []string {
	var out []string
	for _, e := range events {
		out = append(out, e.Type)
	}
	return out
}

// asJSON is v marshalled then decoded generically, for assertions.
func asJSON(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// instanceOf is the instance recorded on a stored response of any
// organisation.
func (s *fakeResponses) instanceOf(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.byID {
		if r.ID == id {
			return r.Instance
		}
	}
	return ""
}

func (s *fakeResponses) Orphaned(_ context.Context, before time.Time) ([]store.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.Response
	for _, r := range s.byID {
		if r.Instance != "" && s.beats[r.Instance].Before(before) {
			out = append(out, r)
		}
	}
	return out, nil
}

func (s *fakeResponses) Unfinished(context.Context) ([]store.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.Response
	for _, r := range s.byID {
		if strings.Contains(string(r.Body), `"status":"queued"`) || strings.Contains(string(r.Body), `"status":"in_progress"`) {
			out = append(out, r)
		}
	}
	return out, nil
}
