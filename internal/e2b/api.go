package e2b

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/store"
	"github.com/cubicle-sandbox/cubicle/internal/strictjson"
)

// maxAPIBody bounds an API request's body.
const maxAPIBody = 64 << 10

// The E2B API's routes the SDKs call (paths relative to Prefix).
func (s *Server) apiRoutes() {
	s.api.Handle("POST /sandboxes", s.apiAuth(s.create))
	s.api.Handle("POST /v2/sandboxes", s.apiAuth(s.create))
	s.api.Handle("GET /sandboxes", s.apiAuth(s.list))
	s.api.Handle("GET /v2/sandboxes", s.apiAuth(s.list))
	s.api.Handle("GET /sandboxes/{id}", s.apiAuth(s.get))
	s.api.Handle("DELETE /sandboxes/{id}", s.apiAuth(s.kill))
	s.api.Handle("POST /sandboxes/{id}/timeout", s.apiAuth(s.setTimeout))
	s.api.Handle("POST /sandboxes/{id}/connect", s.apiAuth(s.connect))
	s.api.Handle("POST /v2/sandboxes/{id}/connect", s.apiAuth(s.connect))
	s.api.Handle("POST /sandboxes/{id}/pause", s.apiAuth(s.pause))
	s.api.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { writeError(w, r, errNoRoute) })
}

// apiAuth authenticates the Cubicle key in X-API-Key (the SDK's E2B_API_KEY).
func (s *Server) apiAuth(h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := s.authenticate(r.Context(), r.Header.Get("X-API-Key"))
		if err == nil {
			err = h(w, r, p)
		}
		if err != nil {
			writeError(w, r, classifyAPI(err))
		}
	})
}

// classifyAPI reads a computer that is already gone as a missing sandbox
// (E2B's kill of a killed sandbox is a 404, which the SDK answers false).
func classifyAPI(err error) error {
	if errors.Is(err, computer.ErrGone) {
		return errdefs.Wrap(errdefs.NotFound, "", fmt.Errorf("%s", err.Error()))
	}
	return err
}

// createBody is the SDK's NewSandbox body; what Cubicle cannot honour is
// refused, not ignored.
type createBody struct {
	TemplateID          string            `json:"templateID"`
	Timeout             *float64          `json:"timeout"`
	Metadata            map[string]string `json:"metadata"`
	EnvVars             map[string]string `json:"envVars"`
	AutoPause           *bool             `json:"autoPause"`
	AllowInternetAccess *bool             `json:"allow_internet_access"`
	MCP                 json.RawMessage   `json:"mcp"`
	VolumeMounts        json.RawMessage   `json:"volumeMounts"`
	Network             json.RawMessage   `json:"network"`
}

// sandboxBody is the API's Sandbox (create and connect).
type sandboxBody struct {
	SandboxID          string  `json:"sandboxID"`
	TemplateID         string  `json:"templateID"`
	Alias              string  `json:"alias,omitempty"`
	ClientID           string  `json:"clientID"`
	EnvdVersion        string  `json:"envdVersion"`
	EnvdAccessToken    string  `json:"envdAccessToken"`
	TrafficAccessToken *string `json:"trafficAccessToken"`
	Domain             *string `json:"domain"`
}

// listedBody is the API's ListedSandbox and SandboxDetail.
type listedBody struct {
	SandboxID    string            `json:"sandboxID"`
	TemplateID   string            `json:"templateID"`
	Alias        string            `json:"alias,omitempty"`
	ClientID     string            `json:"clientID"`
	StartedAt    string            `json:"startedAt"`
	EndAt        string            `json:"endAt"`
	CPUCount     int               `json:"cpuCount"`
	MemoryMB     int64             `json:"memoryMB"`
	DiskSizeMB   int64             `json:"diskSizeMB"`
	Metadata     map[string]string `json:"metadata"`
	State        string            `json:"state"`
	EnvdVersion  string            `json:"envdVersion"`
	VolumeMounts []struct{}        `json:"volumeMounts"`
}

// clientID is the API's clientID of every sandbox (it names E2B's
// machine; Cubicle has one server).
const clientID = "cubicle"

// defaultTemplates are the SDKs' default template names: the caller's
// default template (the key's, else the deployment's).
var defaultTemplates = []string{"", "base", "code-interpreter-v1", "code-interpreter"}

// bodyReadError is why a request body could not be read, as the client's
// error: over the limit (413), stalled (the server's 408), or cut (400).
func bodyReadError(err error, limit int64) error {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return errdefs.Wrap(errdefs.TooLarge, "", fmt.Errorf("the request body is over %d bytes", limit))
	case kindOf(err) == errdefs.Timeout:
		return err
	}
	return errdefs.Wrap(errdefs.InvalidArgument, "", fmt.Errorf("the request body could not be read: %w", err))
}

func kindOf(err error) errdefs.Kind {
	k, _ := errdefs.Of(err)
	return k
}

func decodeBody(r *http.Request, v any, limit int64) error {
	data, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, limit))
	if err != nil {
		return bodyReadError(err, limit)
	}
	if len(data) == 0 {
		return nil
	}
	if err := strictjson.Check(data, nil); err != nil {
		return errdefs.Wrap(errdefs.InvalidArgument, "", fmt.Errorf("the request body gives a key twice: %w", err))
	}
	if err := json.Unmarshal(data, v); err != nil {
		return errdefs.Wrap(errdefs.InvalidArgument, "", fmt.Errorf("the request body is not the JSON expected: %w", err))
	}
	return nil
}

func invalid(format string, args ...any) error {
	return errdefs.New(errdefs.InvalidArgument, "", fmt.Sprintf(format, args...))
}

// seconds converts the API's timeout (seconds) to a lifetime.
func seconds(name string, v *float64) (time.Duration, error) {
	if v == nil {
		return 0, nil
	}
	if math.IsNaN(*v) || *v < 1 || *v > 366*24*3600 {
		return 0, invalid("%s must be 1 to 31622400 seconds", name)
	}
	return time.Duration(*v) * time.Second, nil
}

func (b createBody) request() (computer.CreateRequest, error) {
	switch {
	case len(b.EnvVars) > 0:
		return computer.CreateRequest{}, invalid("envs at sandbox creation are not supported by Cubicle; pass envs to commands.run instead")
	case b.AllowInternetAccess != nil && *b.AllowInternetAccess:
		return computer.CreateRequest{}, invalid("allowInternetAccess is not supported through the E2B API: Cubicle computers have no internet unless created with a network_policy (POST /v1/computers)")
	case isSet(b.MCP):
		return computer.CreateRequest{}, invalid("mcp is not supported by Cubicle")
	case isSet(b.VolumeMounts):
		return computer.CreateRequest{}, invalid("volumeMounts are not supported through the E2B API; use Cubicle's volumes (POST /v1/computers)")
	case isSet(b.Network):
		return computer.CreateRequest{}, invalid("network is not supported through the E2B API")
	}
	life, err := seconds("timeout", b.Timeout)
	if err != nil {
		return computer.CreateRequest{}, err
	}
	req := computer.CreateRequest{Lifetime: life, Metadata: b.Metadata, Template: b.TemplateID}
	if slices.Contains(defaultTemplates, b.TemplateID) {
		req.Template = ""
	}
	if b.AutoPause != nil && *b.AutoPause {
		req.OnExpire = computer.OnExpirePause
	}
	return req, nil
}

// isSet reports whether a JSON value is present and not null.
func isSet(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s != "" && s != "null" && s != "{}" && s != "[]"
}

func (s *Server) create(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	var b createBody
	if err := decodeBody(r, &b, maxAPIBody); err != nil {
		return err
	}
	req, err := b.request()
	if err != nil {
		return err
	}
	v, err := s.mgr.Create(r.Context(), p, req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, s.sandbox(r, v))
	return nil
}

// sandbox is the API's Sandbox of v: its envd access token is the key
// the caller used, which authenticates the SDK's envd requests as the
// same principal.
func (s *Server) sandbox(r *http.Request, v computer.View) sandboxBody {
	return sandboxBody{SandboxID: v.ID, TemplateID: v.Template, Alias: v.Name, ClientID: clientID,
		EnvdVersion: envdVersion, EnvdAccessToken: strings.TrimSpace(r.Header.Get("X-API-Key"))}
}

// state is the API's state of a computer.
func state(status string) string {
	if status == store.StatusPaused {
		return "paused"
	}
	return "running"
}

func listed(v computer.View) listedBody {
	md := v.Metadata
	if md == nil {
		md = map[string]string{}
	}
	return listedBody{SandboxID: v.ID, TemplateID: v.Template, Alias: v.Name, ClientID: clientID,
		StartedAt: v.CreatedAt.UTC().Format(time.RFC3339Nano), EndAt: v.ExpiresAt.UTC().Format(time.RFC3339Nano),
		CPUCount: int(math.Ceil(v.Limits.CPUs)), MemoryMB: v.Limits.MemoryMB, DiskSizeMB: v.Limits.DiskMB,
		Metadata: md, State: state(v.Status), EnvdVersion: envdVersion, VolumeMounts: []struct{}{}}
}

func (s *Server) get(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	v, err := s.mgr.Get(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	if store.Stopped(v.Status) {
		return errdefs.New(errdefs.NotFound, "", "sandbox "+v.ID+" is not running: it was "+v.Status)
	}
	writeJSON(w, http.StatusOK, listed(v))
	return nil
}

// listFilter is the query of GET /v2/sandboxes the SDK sends.
type listFilter struct {
	states   []string
	metadata url.Values
	template string
}

func parseListFilter(q url.Values) (listFilter, error) {
	var f listFilter
	for _, st := range strings.Split(q.Get("state"), ",") {
		switch st {
		case "":
		case "running", "paused":
			f.states = append(f.states, st)
		default:
			return f, invalid("state %q is not running or paused", st)
		}
	}
	if md := q.Get("metadata"); md != "" {
		// The SDK encodes each key and value (encodeURIComponent) before
		// it makes them a query string, which the query encodes again.
		vals, err := url.ParseQuery(md)
		if err != nil {
			return f, invalid("metadata is not a query string: %v", err)
		}
		f.metadata = url.Values{}
		for k, vs := range vals {
			uk, err1 := url.PathUnescape(k)
			uv, err2 := url.PathUnescape(vs[0])
			if err1 != nil || err2 != nil {
				return f, invalid("metadata holds a key or value that is not URI-encoded: %q", k)
			}
			f.metadata.Set(uk, uv)
		}
	}
	f.template = q.Get("template")
	return f, nil
}

func (f listFilter) keep(b listedBody) bool {
	if len(f.states) > 0 && !slices.Contains(f.states, b.State) {
		return false
	}
	if f.template != "" && f.template != b.TemplateID {
		return false
	}
	for k := range f.metadata {
		if b.Metadata[k] != f.metadata.Get(k) {
			return false
		}
	}
	return true
}

// list answers every living sandbox of the caller's organisation in one
// page (no x-next-token).
func (s *Server) list(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	f, err := parseListFilter(r.URL.Query())
	if err != nil {
		return err
	}
	views, err := s.mgr.List(r.Context(), p, false, "")
	if err != nil {
		return err
	}
	out := []listedBody{}
	for _, v := range views {
		if b := listed(v); !store.Stopped(v.Status) && f.keep(b) {
			out = append(out, b)
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) kill(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	if err := s.mgr.Delete(r.Context(), p, r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// timeoutBody is the body of POST /sandboxes/{id}/timeout and connect.
type timeoutBody struct {
	Timeout *float64 `json:"timeout"`
}

// setTimeout moves the sandbox's end to timeout seconds from now.
func (s *Server) setTimeout(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	var b timeoutBody
	if err := decodeBody(r, &b, maxAPIBody); err != nil {
		return err
	}
	if b.Timeout == nil {
		return invalid("timeout is required")
	}
	life, err := seconds("timeout", b.Timeout)
	if err != nil {
		return err
	}
	if _, err := s.mgr.Extend(r.Context(), p, r.PathValue("id"), life); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// connect answers a running sandbox (resuming a paused one), its end
// moved to timeout seconds from now when given.
func (s *Server) connect(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	var b timeoutBody
	if err := decodeBody(r, &b, maxAPIBody); err != nil {
		return err
	}
	life, err := seconds("timeout", b.Timeout)
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	v, err := s.mgr.Get(r.Context(), p, id)
	if err != nil {
		return err
	}
	code := http.StatusOK
	if v.Status == store.StatusPaused {
		if v, err = s.mgr.Resume(r.Context(), p, id); err != nil {
			return err
		}
		code = http.StatusCreated
	} else if store.Stopped(v.Status) {
		return errdefs.New(errdefs.NotFound, "", "sandbox "+id+" is not running: it was "+v.Status)
	}
	if life > 0 {
		if v, err = s.mgr.Extend(r.Context(), p, id, life); err != nil {
			return err
		}
	}
	writeJSON(w, code, s.sandbox(r, v))
	return nil
}

func (s *Server) pause(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	if _, err := s.mgr.Pause(r.Context(), p, r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
