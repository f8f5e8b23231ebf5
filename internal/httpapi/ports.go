package httpapi

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/log"
)

// Ports: GET /v1/computers/{id}/ports lists what listens in a computer;
// /v1/computers/{id}/ports/{port}/{path...} proxies HTTP (and WebSocket
// upgrades) to http://127.0.0.1:{port}/{path...} inside it, with an API
// key or a preview link's token (POST /v1/computers/{id}/links). The
// computer's agent dials the port in the computer's network namespace
// (computer.Manager.DialPort); httputil.ReverseProxy does the HTTP.

const (
	// linkParam is the query parameter carrying a preview link's token;
	// linkCookie the cookie it is then kept in (scoped to the port's path).
	linkParam  = "cubicle_token"
	linkCookie = "cubicle_link"
	// Preview links live linkDefault unless asked, at most linkMax; a
	// computer holds at most maxLinks.
	linkDefault = time.Hour
	linkMax     = 24 * time.Hour
	maxLinks    = 64
	// portPoolHost is the suffix of the proxy transport's pool key: the
	// outgoing URL's host is "<id>.cubicle-port:<port>" so that
	// connections are pooled per computer and port; the Host header is
	// 127.0.0.1:<port>.
	portPoolHost = ".cubicle-port"
)

// listPorts is GET /v1/computers/{id}/ports.
func (a *API) listPorts(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	list, err := a.comp.ListPorts(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	data := make([]portListener, len(list.Ports))
	for i, l := range list.Ports {
		data[i] = portListener{Port: l.Port, Address: l.Address, Family: l.Family}
	}
	writeJSON(w, http.StatusOK, portsAnswer{Object: "list", Data: data, Truncated: list.Truncated})
	return nil
}

// portTarget is what a proxied request goes to, and as whom.
type portTarget struct {
	p      governance.Principal
	id     string
	port   int
	prefix string // /v1/computers/{id}/ports/{port}; "" on a preview host (porthost.go)
}

type portTargetKey struct{}

func portPrefix(id string, port int) string {
	return "/v1/computers/" + id + "/ports/" + strconv.Itoa(port)
}

// portRedirect sends /v1/computers/{id}/ports/{port} to its directory, so
// relative links of the app resolve under the prefix.
func (a *API) portRedirect(w http.ResponseWriter, r *http.Request) {
	u := *r.URL
	u.Path += "/"
	u.RawPath = ""
	http.Redirect(w, r, u.String(), http.StatusPermanentRedirect)
}

// proxyPort serves /v1/computers/{id}/ports/{port}/{path...}.
func (a *API) proxyPort(w http.ResponseWriter, r *http.Request) {
	attachComputer(r)
	id := r.PathValue("id")
	port, err := strconv.Atoi(r.PathValue("port"))
	if err == nil {
		err = computer.ValidPort(port)
	} else {
		err = &computer.FieldError{Field: "port", Err: fmt.Errorf("%w: a port is a number from 1 to 65535", computer.ErrInvalid)}
	}
	if err != nil {
		writeError(w, r, err)
		return
	}
	a.proxyTo(w, r, portTarget{id: id, port: port, prefix: portPrefix(id, port)})
}

// proxyTo proxies r to t (its principal still unknown), by its path
// below t.prefix. It authenticates with the API key (Authorization),
// else a preview link's token (query cubicle_token, then its cookie).
func (a *API) proxyTo(w http.ResponseWriter, r *http.Request, t portTarget) {
	var err error
	if r.Header.Get("Authorization") != "" {
		t.p, err = a.gov.Authenticate(r.Context(), bearer(r))
	} else {
		t.p, err = a.linkPrincipal(w, r, t)
		if err == errRedirected {
			return
		}
	}
	attachPrincipal(r.Context(), t.p, err)
	if err == nil {
		// Every request is authorized (the transport pools connections
		// per computer and port, whoever opened them).
		err = a.comp.CheckPorts(r.Context(), t.p, t.id)
	}
	if err != nil {
		writeError(w, r, err)
		return
	}
	ctx := context.WithValue(r.Context(), portTargetKey{}, t)
	// The app may answer while it reads the body: without full duplex
	// the server would drain the body (up to 256 KiB) at the answer's
	// first flush, taking it from the app.
	http.NewResponseController(w).EnableFullDuplex()
	a.portProxy.ServeHTTP(w, r.WithContext(ctx))
}

var errRedirected = errors.New("redirected")

// newPortProxy is the reverse proxy of every computer's ports.
func (a *API) newPortProxy() *httputil.ReverseProxy {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			t, ok := ctx.Value(portTargetKey{}).(portTarget)
			if !ok || addr != t.id+portPoolHost+":"+strconv.Itoa(t.port) {
				return nil, fmt.Errorf("port proxy: no target for %q", addr)
			}
			return a.comp.DialPort(ctx, t.p, t.id, t.port)
		},
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       30 * time.Second,
		DisableCompression:    true,
		ResponseHeaderTimeout: 0, // a slow app is the app's business; the client may hang up
	}
	return &httputil.ReverseProxy{
		Transport:     tr,
		FlushInterval: -1, // stream (server-sent events, long polls) as it comes
		Rewrite: func(pr *httputil.ProxyRequest) {
			t := pr.In.Context().Value(portTargetKey{}).(portTarget)
			out := pr.Out
			out.URL.Scheme = "http"
			out.URL.Host = t.id + portPoolHost + ":" + strconv.Itoa(t.port)
			out.Host = "127.0.0.1:" + strconv.Itoa(t.port)
			path := strings.TrimPrefix(pr.In.URL.EscapedPath(), t.prefix)
			if path == "" {
				path = "/"
			}
			if u, err := url.Parse(path); err == nil {
				out.URL.Path, out.URL.RawPath = u.Path, u.RawPath
			}
			if q := pr.In.URL.Query(); q.Has(linkParam) {
				q.Del(linkParam)
				out.URL.RawQuery = q.Encode()
			}
			stripCubicle(out.Header)
			pr.SetXForwarded()
			if t.prefix != "" {
				out.Header.Set("X-Forwarded-Prefix", t.prefix)
			}
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
				return // the client went away
			}
			if k, _ := errdefs.Of(err); k != errdefs.Unknown {
				writeError(w, r, err)
				return
			}
			t, _ := r.Context().Value(portTargetKey{}).(portTarget)
			log.From(r.Context()).InfoContext(r.Context(), "port proxy", "err", err)
			writeError(w, r, errdefs.Wrap(errdefs.BadGateway, "port_failed",
				fmt.Errorf("port %d of %s: the server in the computer failed: %v", t.port, t.id, err)))
		},
	}
}

// stripCubicle removes Cubicle's credentials and headers: the API key,
// the preview link's cookie, X-Cubicle-*.
func stripCubicle(h http.Header) {
	h.Del("Authorization")
	for k := range h {
		if strings.HasPrefix(k, "X-Cubicle-") || strings.HasPrefix(k, "Cubicle-") {
			delete(h, k)
		}
	}
	cookies := h.Values("Cookie")
	if len(cookies) == 0 {
		return
	}
	h.Del("Cookie")
	var kept []string
	for _, line := range cookies {
		for _, part := range strings.Split(line, ";") {
			if name, _, _ := strings.Cut(strings.TrimSpace(part), "="); name != linkCookie && strings.TrimSpace(part) != "" {
				kept = append(kept, strings.TrimSpace(part))
			}
		}
	}
	if len(kept) > 0 {
		h.Set("Cookie", strings.Join(kept, "; "))
	}
}

// portLink is a preview link: its token (hashed) opens one port of one
// computer, as the key that made it, until it expires or is deleted.
type portLink struct {
	ID        string    `json:"id"`
	Computer  string    `json:"computer_id"`
	Port      int       `json:"port"`
	ExpiresAt time.Time `json:"expires_at"`
	CreatedAt time.Time `json:"created_at"`
	p         governance.Principal
	hash      string
}

// portsAnswer is GET /v1/computers/{id}/ports.
type portsAnswer struct {
	Object    string         `json:"object"`
	Data      []portListener `json:"data"`
	Truncated bool           `json:"truncated"`
}

// portListener is one listening TCP socket: its port, address ("0.0.0.0",
// "127.0.0.1", "::") and family ("tcp", "tcp6").
type portListener struct {
	Port    int    `json:"port"`
	Address string `json:"address"`
	Family  string `json:"family"`
}

// linkAnswer is a preview link as made, with its token (shown once).
type linkAnswer struct {
	ID         string    `json:"id"`
	Object     string    `json:"object"`
	ComputerID string    `json:"computer_id"`
	Port       int       `json:"port"`
	URL        string    `json:"url"`
	Token      string    `json:"token"`
	ExpiresAt  time.Time `json:"expires_at"`
	CreatedAt  time.Time `json:"created_at"`
}

// portLinks are the live preview links, in memory only: a restart of the
// server invalidates them all.
type portLinks struct {
	mu     sync.Mutex
	byHash map[string]*portLink
}

func hashToken(tok string) string {
	sum := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(sum[:])
}

func (l *portLinks) purge(now time.Time) {
	for h, k := range l.byHash {
		if !now.Before(k.ExpiresAt) {
			delete(l.byHash, h)
		}
	}
}

func (l *portLinks) lookup(tok string) *portLink {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := l.byHash[hashToken(tok)]
	if k == nil || !time.Now().Before(k.ExpiresAt) {
		return nil
	}
	return k
}

// linkPrincipal authenticates a proxied request by a preview link. A
// token in the query of a GET becomes a cookie (scoped to the port's
// path) and the request is redirected without it, so the token leaves
// the address bar and never reaches the app.
func (a *API) linkPrincipal(w http.ResponseWriter, r *http.Request, t portTarget) (governance.Principal, error) {
	tok := r.URL.Query().Get("cubicle_token") // linkParam
	fromQuery := tok != ""
	if !fromQuery {
		if c, err := r.Cookie(linkCookie); err == nil {
			tok = c.Value
		}
	}
	if tok == "" {
		return governance.Principal{}, governance.ErrUnauthenticated
	}
	k := a.links.lookup(tok)
	if k == nil || k.Computer != t.id || k.Port != t.port {
		return governance.Principal{}, fmt.Errorf("%w: the preview link is unknown, expired, deleted, or for another port", governance.ErrUnauthenticated)
	}
	if key, err := a.st.Keys().Get(r.Context(), k.p.Key.ID); err != nil || key.RevokedAt != nil {
		return governance.Principal{}, fmt.Errorf("%w: the key that made the preview link was revoked", governance.ErrUnauthenticated)
	}
	if fromQuery {
		http.SetCookie(w, &http.Cookie{Name: linkCookie, Value: tok, Path: t.prefix + "/",
			Expires: k.ExpiresAt, HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode})
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			u := *r.URL
			q := u.Query()
			q.Del(linkParam)
			u.RawQuery = q.Encode()
			http.Redirect(w, r, u.RequestURI(), http.StatusFound)
			return governance.Principal{}, errRedirected
		}
	}
	return k.p, nil
}

type linkBody struct {
	Port             int `json:"port"`
	ExpiresInSeconds int `json:"expires_in_seconds,omitempty"` // default 3600
}

// createLink is POST /v1/computers/{id}/links {"port", "expires_in_seconds"}.
func (a *API) createLink(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	var body linkBody
	if err := decode(r, &body); err != nil {
		return err
	}
	if err := computer.ValidPort(body.Port); err != nil {
		return err
	}
	life := linkDefault
	if body.ExpiresInSeconds != 0 {
		if body.ExpiresInSeconds < 1 || body.ExpiresInSeconds > int(linkMax/time.Second) {
			return &computer.FieldError{Field: "expires_in_seconds", Err: fmt.Errorf("%w: from 1 to %d", computer.ErrInvalid, int(linkMax/time.Second))}
		}
		life = time.Duration(body.ExpiresInSeconds) * time.Second
	}
	id := r.PathValue("id")
	if err := a.comp.CheckPorts(r.Context(), p, id); err != nil {
		return err
	}
	var raw [32]byte
	rand.Read(raw[:])
	tok := "cpl_" + base64.RawURLEncoding.EncodeToString(raw[:])
	var rid [8]byte
	rand.Read(rid[:])
	now := time.Now().UTC()
	k := &portLink{ID: "link_" + hex.EncodeToString(rid[:]), Computer: id, Port: body.Port,
		CreatedAt: now, ExpiresAt: now.Add(life).Truncate(time.Second), p: p, hash: hashToken(tok)}
	a.links.mu.Lock()
	a.links.purge(now)
	n := 0
	for _, o := range a.links.byHash {
		if o.Computer == id {
			n++
		}
	}
	if n >= maxLinks {
		a.links.mu.Unlock()
		return errdefs.New(errdefs.ResourceExhausted, "too_many_links", fmt.Sprintf("%s has %d preview links, the most it may; delete one", id, maxLinks))
	}
	if a.links.byHash == nil {
		a.links.byHash = make(map[string]*portLink)
	}
	a.links.byHash[k.hash] = k
	a.links.mu.Unlock()
	u := portPrefix(id, body.Port) + "/?" + linkParam + "=" + tok
	if host := a.previewHost(r.Host, id, body.Port); host != "" || r.Host != "" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		if host != "" {
			u = scheme + "://" + host + "/?" + linkParam + "=" + tok
		} else {
			u = scheme + "://" + r.Host + u
		}
	}
	writeJSON(w, http.StatusCreated, linkAnswer{ID: k.ID, Object: "computer.link", ComputerID: id,
		Port: k.Port, URL: u, Token: tok, ExpiresAt: k.ExpiresAt, CreatedAt: k.CreatedAt})
	return nil
}

// listLinks is GET /v1/computers/{id}/links (tokens are not shown again).
func (a *API) listLinks(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	id := r.PathValue("id")
	if err := a.comp.CheckPorts(r.Context(), p, id); err != nil {
		return err
	}
	a.links.mu.Lock()
	a.links.purge(time.Now())
	data := []portLink{}
	for _, k := range a.links.byHash {
		if k.Computer == id {
			data = append(data, *k)
		}
	}
	a.links.mu.Unlock()
	slices.SortFunc(data, func(x, y portLink) int { return cmp.Or(x.CreatedAt.Compare(y.CreatedAt), strings.Compare(x.ID, y.ID)) })
	page, err := listPage(r, data, func(k portLink) string { return k.ID }, false)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// deleteLink is DELETE /v1/computers/{id}/links/{link}: the token stops
// working at once (connections it opened stay until they close).
func (a *API) deleteLink(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	id := r.PathValue("id")
	if err := a.comp.CheckPorts(r.Context(), p, id); err != nil {
		return err
	}
	a.links.mu.Lock()
	found := false
	for h, k := range a.links.byHash {
		if k.Computer == id && k.ID == r.PathValue("link") {
			delete(a.links.byHash, h)
			found = true
		}
	}
	a.links.mu.Unlock()
	if !found {
		return errdefs.New(errdefs.NotFound, "", "no such preview link: "+r.PathValue("link"))
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": r.PathValue("link"), "object": "computer.link.deleted", "deleted": true})
	return nil
}
