package fleet

import (
	"context"
	"errors"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
	"github.com/cubicle-sandbox/cubicle/internal/errdefs/errhttp"
	"github.com/cubicle-sandbox/cubicle/internal/log"
	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// Config is what the forwarder needs of its server.
type Config struct {
	// Self is this server's instance id.
	Self string
	// Secret is the cluster's shared secret (cluster.secret); empty: this
	// server neither forwards nor takes forwarded requests.
	Secret []byte
	// Lease is how long an instance counts as alive after its last beat:
	// a lapsed owner's computers are answered here (they are about to be
	// marked failed).
	Lease time.Duration
	// Local reports whether a computer runs on this server.
	Local func(id string) bool
	// Owners finds a computer's owner (store.Instances).
	Owners interface {
		Owner(ctx context.Context, computerID string) (store.Instance, error)
		OwnerByMetadata(ctx context.Context, key, value string) (string, store.Instance, error)
		OwnerOfResponse(ctx context.Context, responseID string) (store.Instance, error)
		OwnerOfKept(ctx context.Context, responseID, key string) (string, store.Instance, error)
	}
	// KernelMetadata is the computer metadata key that names a Kernel
	// Gateway kernel's id ("": kernel requests are not forwarded).
	KernelMetadata string
	// MCPBodyLimit bounds how much of an MCP request's body is read to
	// find its computer_id (0: MCP requests are not forwarded).
	MCPBodyLimit int64
	// KeptComputer is the member of a stored response's conversation that
	// names the computer kept for it; ResponsesBodyLimit bounds how much
	// of a POST /v1/responses body is read to find its
	// previous_response_id (0: responses that continue one are not
	// forwarded).
	KeptComputer       string
	ResponsesBodyLimit int64
	// Transport carries forwarded requests (nil: http.DefaultTransport).
	Transport http.RoundTripper
}

// Forwarder serves next, forwarding the requests for computers another
// live replica owns to it.
type Forwarder struct {
	cfg   Config
	next  http.Handler
	proxy *httputil.ReverseProxy
}

// New wraps next.
func New(cfg Config, next http.Handler) *Forwarder {
	f := &Forwarder{cfg: cfg, next: next}
	f.proxy = &httputil.ReverseProxy{
		Rewrite:       f.rewrite,
		Transport:     cfg.Transport,
		FlushInterval: -1, // SSE and streamed output go through as written
		ErrorHandler:  f.proxyError,
	}
	return f
}

// target is the owner a request is forwarded to (in its context).
type target struct{ in store.Instance }

func (f *Forwarder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(Header) != "" {
		if err := verify(r, f.cfg.Secret, time.Now()); err != nil {
			log.From(r.Context()).WarnContext(r.Context(), "refused a forwarded request", "path", r.URL.Path, "err", err)
			writeError(w, r, errdefs.New(errdefs.Unauthenticated, "forward_refused", "forwarded request refused: "+err.Error()))
			return
		}
		r.Header.Del(Header)
		f.next.ServeHTTP(w, r) // served here, never forwarded again
		return
	}
	rt, err := f.routeOf(r)
	if err == nil && rt.owner == nil && (rt.computer == "" || rt.record || f.cfg.Local(rt.computer)) {
		// Not a computer's, its record (the store has it: any replica
		// answers, even while its owner is unreachable), or ours.
		f.next.ServeHTTP(w, r)
		return
	}
	var in store.Instance
	if err == nil {
		in, err = f.ownerOf(r.Context(), rt)
	}
	if err != nil || in.ID == f.cfg.Self || time.Since(in.LastSeen) > f.cfg.Lease {
		// Unknown, stopped, ours or its server's lease lapsed: answered
		// here (404, its state, or its failure once it is recorded).
		f.next.ServeHTTP(w, r)
		return
	}
	what := rt.what
	if what == "" {
		what = "computer " + rt.computer
	}
	if len(f.cfg.Secret) == 0 || in.URL == "" {
		writeError(w, r, errdefs.New(errdefs.Unavailable, "computer_elsewhere",
			what+" runs on another server, which this one cannot forward to (set cluster.secret and cluster.url on every replica)"))
		return
	}
	// The owner may answer before the body's end reaches it (a stream
	// opens once the command is read): without full duplex the server
	// would drain and close the body under the proxy's pending read at
	// the first flush, and the proxy would drop the connection to the
	// owner, cutting the stream.
	http.NewResponseController(w).EnableFullDuplex()
	f.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), target{}, in)))
}

func (f *Forwarder) rewrite(pr *httputil.ProxyRequest) {
	in := pr.In.Context().Value(target{}).(store.Instance)
	u, _ := url.Parse(in.URL) // checked when it was advertised (config)
	pr.SetURL(u)
	pr.SetXForwarded()
	pr.Out.Host = pr.In.Host // the owner builds links for the caller's host
	sign(pr.Out, f.cfg.Secret, f.cfg.Self, time.Now())
}

func (f *Forwarder) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	in := r.Context().Value(target{}).(store.Instance)
	if errors.Is(err, context.Canceled) {
		return // the caller went away
	}
	log.From(r.Context()).WarnContext(r.Context(), "forward to the computer's server", "owner", in.ID, "err", err)
	writeError(w, r, errdefs.New(errdefs.Unavailable, "computer_server_unreachable",
		"the server that runs this computer did not answer; try again"))
}

func writeError(w http.ResponseWriter, r *http.Request, err error) {
	errhttp.WriteOpenAI(w, r, err, err.Error())
}

// ComputerID is the computer a REST path names (/v1/computers/{id}/…),
// "" for any other path.
func ComputerID(path string) string {
	rest, ok := strings.CutPrefix(path, "/v1/computers/")
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, "/")
	return id
}
