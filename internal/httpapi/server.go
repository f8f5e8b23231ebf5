package httpapi

import (
	"cmp"
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/files"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/log"
	"github.com/cubicle-sandbox/cubicle/internal/mcp"
	"github.com/cubicle-sandbox/cubicle/internal/responses"
	"github.com/cubicle-sandbox/cubicle/internal/scripts"
	"github.com/cubicle-sandbox/cubicle/internal/store"
	"github.com/cubicle-sandbox/cubicle/internal/tools"
)

// Options are what the API serves, all given at construction (New): the
// services first, then the transports mounted beside it.
type Options struct {
	Governance *governance.Service
	Computers  *computer.Manager
	Store      store.Store
	// Files serves /v1/files and /v1/artifacts; nil: they answer 404
	// "not configured".
	Files *files.Service
	// Gateway serves /v1/responses; nil (no upstream is configured): it
	// answers 503 gateway_not_configured.
	Gateway *responses.Gateway
	// BodyTimeout is how long a request body may go without a byte
	// before the request ends with 408 (slowclients.go); 0:
	// DefaultBodyTimeout.
	BodyTimeout time.Duration
	// Mounts are other transports served on the same listener (the
	// Jupyter Kernel Gateway API, internal/jupyter), which do their own
	// authentication.
	Mounts []Mount
	// PreviewDomain serves <port>-<id>.<domain> as that computer's port
	// (porthost.go); "": off.
	PreviewDomain string
	// Scripts serves /v1/scripts and the scripts' tools; nil: one on
	// Store and Governance.
	Scripts *scripts.Service
}

// Mount is a transport whose routes the API serves beside its own.
type Mount interface {
	// Routes registers its routes with handle (a ServeMux's Handle).
	Routes(handle func(pattern string, h http.Handler))
}

// API serves Cubicle's REST endpoints.
type API struct {
	gov   *governance.Service
	comp  *computer.Manager
	st    store.Store
	tools *tools.Registry
	files *files.Service // nil: files and artifacts are not configured
	// gateway serves /v1/responses; nil: no upstream is configured.
	gateway *responses.Gateway
	ready   atomic.Bool
	mux     *http.ServeMux
	// sockets are the Responses WebSocket connections, hijacked from the
	// HTTP server (which does not wait for them): CloseSockets ends them.
	sockets sockets
	// bodyTimeout is how long a request body may go without a byte (slowclients.go).
	bodyTimeout time.Duration
	// mcp serves /mcp: the computers as MCP tools (internal/mcp).
	mcp *mcp.Server
	// patterns are the API's own routes as registered (not the mounts'):
	// the OpenAPI document describes exactly these (openapi.go).
	patterns []string
	// portProxy and links serve the computers' ports (ports.go).
	portProxy http.Handler
	links     portLinks
	// previewDomain: hosts below it are computers' ports (porthost.go).
	previewDomain string
	// scripts are the organisations' own programs (scripts.go).
	scripts *scripts.Service
}

// New builds the handler. Readiness starts false: SetReady, the one
// state that changes while serving, flips it once the isolation probe
// passed.
func New(o Options) *API {
	a := &API{gov: o.Governance, comp: o.Computers, st: o.Store, tools: tools.Default(), files: o.Files,
		gateway: o.Gateway, mux: http.NewServeMux(), bodyTimeout: cmp.Or(o.BodyTimeout, DefaultBodyTimeout),
		previewDomain: strings.ToLower(o.PreviewDomain), scripts: o.Scripts}
	if a.scripts == nil {
		a.scripts = scripts.New(o.Store, o.Governance)
	}
	a.sockets.ctx, a.sockets.cancel = context.WithCancel(context.Background())
	a.mcp = mcp.New(a.comp, a.tools, a.scripts)
	a.portProxy = a.newPortProxy()
	a.routes()
	for _, m := range o.Mounts {
		m.Routes(a.mux.Handle)
	}
	return a
}

// SetReady marks the server ready (GET /readyz answers 200).
func (a *API) SetReady(ok bool) { a.ready.Store(ok) }

// routeRecorder registers routes on the mux and keeps their patterns.
type routeRecorder struct {
	mux      *http.ServeMux
	patterns []string
}

func (r *routeRecorder) Handle(pattern string, h http.Handler) {
	r.patterns = append(r.patterns, pattern)
	r.mux.Handle(pattern, h)
}

func (r *routeRecorder) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	r.Handle(pattern, http.HandlerFunc(h))
}

func (a *API) routes() {
	m := &routeRecorder{mux: a.mux}
	defer func() { a.patterns = m.patterns }()
	m.HandleFunc("GET /openapi.json", serveOpenAPI)
	m.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	m.HandleFunc("GET /readyz", a.readyz)
	m.HandleFunc("GET /metrics", a.metrics)

	m.Handle("POST /v1/computers", a.auth(a.createComputer))
	m.Handle("GET /v1/computers", a.auth(a.listComputers))
	m.Handle("GET /v1/computers/{id}", a.auth(a.getComputer))
	m.Handle("DELETE /v1/computers/{id}", a.auth(a.deleteComputer))
	m.Handle("POST /v1/computers/{id}/lifetime", a.auth(a.extendComputer))
	m.Handle("POST /v1/computers/{id}/pause", a.auth(computerAction(a.comp.Pause)))   // stops it, keeping its workspace
	m.Handle("POST /v1/computers/{id}/resume", a.auth(computerAction(a.comp.Resume))) // starts a paused one again
	m.Handle("POST /v1/computers/{id}/exec", a.auth(a.exec))
	m.Handle("POST /v1/computers/{id}/processes", a.auth(a.startProcess))
	m.Handle("GET /v1/computers/{id}/processes", a.auth(a.listProcesses))
	m.Handle("GET /v1/computers/{id}/processes/{pid}", a.auth(a.getProcess))
	m.Handle("DELETE /v1/computers/{id}/processes/{pid}", a.auth(a.killProcess))
	m.Handle("GET /v1/computers/{id}/processes/{pid}/output", a.auth(a.processOutput))
	m.Handle("POST /v1/computers/{id}/processes/{pid}/stdin", a.auth(a.processStdin))
	m.Handle("POST /v1/computers/{id}/processes/{pid}/signal", a.auth(a.signalProcess))
	m.Handle("GET /v1/computers/{id}/pty", wsToken(a.auth(a.pty)))
	m.Handle("GET /v1/computers/{id}/terminals", a.auth(a.listTerminals))
	m.Handle("DELETE /v1/computers/{id}/terminals/{tid}", a.auth(a.deleteTerminal))
	m.Handle("POST /v1/computers/{id}/python", a.auth(a.python))
	m.Handle("POST /v1/computers/{id}/python/interrupt", a.auth(a.pythonControl("interrupt")))
	m.Handle("POST /v1/computers/{id}/python/restart", a.auth(a.pythonControl("restart")))
	m.Handle("GET /v1/computers/{id}/files", a.auth(a.listFiles))
	m.Handle("GET /v1/computers/{id}/watch", a.auth(a.watchFiles))
	m.Handle("PUT /v1/computers/{id}/files/{path...}", a.auth(a.putFile))
	m.Handle("GET /v1/computers/{id}/files/{path...}", a.auth(a.getFile))
	m.Handle("DELETE /v1/computers/{id}/files/{path...}", a.auth(a.deleteFile))
	m.Handle("POST /v1/computers/{id}/files/move", a.auth(a.moveFile))
	m.Handle("POST /v1/computers/{id}/files/mkdir", a.auth(a.mkdirFile))
	m.Handle("POST /v1/computers/{id}/tools/{name}", a.auth(a.computerTool))
	m.Handle("GET /v1/computers/{id}/egress", a.auth(a.computerEgress))
	m.Handle("GET /v1/computers/{id}/ports", a.auth(a.listPorts))
	m.HandleFunc("/v1/computers/{id}/ports/{port}", a.portRedirect)
	m.HandleFunc("/v1/computers/{id}/ports/{port}/{path...}", a.proxyPort)
	m.Handle("POST /v1/computers/{id}/links", a.auth(a.createLink))
	m.Handle("GET /v1/computers/{id}/links", a.auth(a.listLinks))
	m.Handle("DELETE /v1/computers/{id}/links/{link}", a.auth(a.deleteLink))
	m.Handle("GET /v1/computer-egress", a.auth(a.orgEgress))
	m.Handle("POST /v1/containers", a.auth(a.createContainer))
	m.Handle("GET /v1/containers", a.auth(a.listContainers))
	m.Handle("GET /v1/containers/{id}", a.auth(a.getContainer))
	m.Handle("DELETE /v1/containers/{id}", a.auth(a.deleteContainer))
	m.Handle("POST /v1/containers/{id}/files", a.auth(a.createContainerFile))
	m.Handle("GET /v1/containers/{id}/files", a.auth(a.listContainerFiles))
	m.Handle("GET /v1/containers/{id}/files/{file}", a.auth(a.getContainerFile))
	m.Handle("GET /v1/containers/{id}/files/{file}/content", a.auth(a.containerFileContent))
	m.Handle("DELETE /v1/containers/{id}/files/{file}", a.auth(a.deleteContainerFile))
	m.Handle("GET /v1/templates", a.auth(a.listTemplates))
	m.Handle("POST /v1/volumes", a.auth(a.createVolume))
	m.Handle("GET /v1/volumes", a.auth(a.listVolumes))
	m.Handle("GET /v1/volumes/{name}", a.auth(a.getVolume))
	m.Handle("DELETE /v1/volumes/{name}", a.auth(a.deleteVolume))
	m.Handle("GET /v1/templates/{name}", a.auth(a.getTemplate))
	m.Handle("POST /v1/templates", a.admin(a.createTemplate))
	m.Handle("DELETE /v1/templates/{name}", a.admin(a.deleteTemplate))
	m.Handle("POST /v1/scripts", a.admin(a.createScript))
	m.Handle("GET /v1/scripts", a.admin(a.listScripts))
	m.Handle("GET /v1/scripts/{name}", a.admin(a.getScript))
	m.Handle("PUT /v1/scripts/{name}", a.admin(a.replaceScript))
	m.Handle("DELETE /v1/scripts/{name}", a.admin(a.deleteScript))
	m.Handle("GET /v1/tools", a.auth(a.listTools))
	m.Handle("POST /v1/tools/{name}/call", a.auth(a.callTool))
	m.Handle("POST /v1/files", a.auth(a.uploadFile))
	m.Handle("GET /v1/files", a.auth(a.listUploads))
	m.Handle("GET /v1/files/{id}", a.auth(a.getUpload))
	m.Handle("GET /v1/files/{id}/content", a.auth(a.uploadContent))
	m.Handle("DELETE /v1/files/{id}", a.auth(a.deleteUpload))
	m.Handle("GET /v1/artifacts", a.auth(a.listArtifacts))
	m.Handle("GET /v1/artifacts/{id}", a.auth(a.getArtifact))
	m.Handle("GET /v1/artifacts/{id}/content", a.auth(a.artifactContent))
	m.Handle("POST /v1/responses", a.auth(a.createResponse))
	m.Handle("GET /v1/responses", a.auth(a.responsesSocket))
	m.Handle("GET /v1/responses/{id}", a.auth(a.getResponse))
	m.Handle("POST /v1/responses/{id}/cancel", a.auth(a.cancelResponse))
	m.Handle("DELETE /v1/responses/{id}", a.auth(a.deleteResponse))
	m.Handle("GET /v1/usage", a.auth(a.usage))
	m.Handle("GET /v1/audit", a.auth(a.audit))
	// MCP over streamable HTTP (docs/mcp.md): the same keys, principal and
	// audit as every /v1 route.
	m.Handle("/mcp", a.auth(func(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
		a.mcp.ServeHTTP(w, r, p)
		return nil
	}))

	m.Handle("POST /v1/admin/orgs", a.admin(a.createOrg))
	m.Handle("GET /v1/admin/orgs", a.admin(a.listOrgs))
	m.Handle("PATCH /v1/admin/orgs/{id}", a.admin(a.updateOrg))
	m.Handle("POST /v1/admin/orgs/{id}/domain_secrets", a.admin(a.setOrgSecret))
	m.Handle("GET /v1/admin/orgs/{id}/domain_secrets", a.admin(a.listOrgSecrets))
	m.Handle("DELETE /v1/admin/orgs/{id}/domain_secrets", a.admin(a.deleteOrgSecret))
	m.Handle("POST /v1/admin/keys", a.admin(a.createKey))
	m.Handle("GET /v1/admin/keys", a.admin(a.listKeys))
	m.Handle("PATCH /v1/admin/keys/{id}", a.admin(a.updateKey))
	m.Handle("DELETE /v1/admin/keys/{id}", a.admin(a.revokeKey))
	m.HandleFunc("/", a.noRoute)
}

// ServeHTTP gives every request its id and logger (middleware.go) and logs
// it with its duration.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	log.HTTP(http.HandlerFunc(a.serve)).ServeHTTP(w, r)
}

func (a *API) serve(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
	a.withBodyDeadline(w, r)
	if t, ok := a.previewTarget(r); ok {
		a.servePreview(rec, r, t) // the app's own paths, as they come
	} else if uncleanPath(r.URL.EscapedPath()) { // as the mux matches it: %2F is no separator
		refuseUncleanPath(rec, r)
	} else {
		a.attachRoute(r)
		a.mux.ServeHTTP(rec, r)
	}
	log.From(r.Context()).DebugContext(r.Context(), "http", "method", r.Method, "status", rec.code,
		"ms", time.Since(start).Milliseconds())
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}

// Flush lets SSE handlers flush through the recorder.
func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap exposes the writer to http.ResponseController.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

type principalKey struct{}

// handler is an authenticated handler.
type handler func(w http.ResponseWriter, r *http.Request, p governance.Principal) error

func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if t, ok := strings.CutPrefix(h, "Bearer "); ok {
		return strings.TrimSpace(t)
	}
	return ""
}

func (a *API) auth(h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attachComputer(r)
		p, err := a.gov.Authenticate(r.Context(), bearer(r))
		attachPrincipal(r.Context(), p, err)
		if err != nil {
			writeError(w, r, err)
			return
		}
		ctx := context.WithValue(r.Context(), principalKey{}, p)
		if err := h(w, r.WithContext(ctx), p); err != nil {
			writeError(w, r, err)
		}
	})
}

func (a *API) admin(h handler) http.Handler {
	return a.auth(func(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
		if !p.Admin() {
			return governance.ErrForbidden
		}
		return h(w, r, p)
	})
}

func (a *API) readyz(w http.ResponseWriter, r *http.Request) {
	if !a.ready.Load() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "starting: the isolation probe has not passed yet"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}
