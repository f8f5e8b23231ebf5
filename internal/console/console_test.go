package console_test

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/console"
)

// serve mounts the console alone on a mux, as httpapi mounts it.
func serve(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	console.New().Routes(mux.Handle)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url string, hdr ...string) (*http.Response, string) {
	t.Helper()
	return do(t, http.MethodGet, url, hdr...)
}

// do sends a request with the headers hdr (name, value, …) and reads the
// whole answer.
func do(t *testing.T, method, url string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), method, url, nil)
	req.Header.Set("Accept-Encoding", "identity") // else the transport asks for gzip and decompresses
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

var inlineHandler = regexp.MustCompile(`\son[a-z]+=`)

var nonceAttr = regexp.MustCompile(`<link rel="stylesheet" href="/console/style.css" nonce="([A-Za-z0-9+/=]{24})">`)

// TestIndex: / is the page with a fresh nonce per response, in its
// stylesheet link and in a policy that allows no inline script, no eval, no
// other origin and no framing; it is never cached.
func TestIndex(t *testing.T) {
	srv := serve(t)
	var nonces []string
	for range 2 {
		resp, body := get(t, srv.URL+"/")
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
			t.Fatalf("GET /: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		m := nonceAttr.FindStringSubmatch(body)
		if m == nil || strings.Contains(body, "__CSP_NONCE__") {
			t.Fatalf("no nonce in the page:\n%s", body)
		}
		nonces = append(nonces, m[1])
		csp := resp.Header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self';", "style-src 'self' 'nonce-" + m[1] + "';",
			"connect-src 'self'", "frame-ancestors 'none'", "base-uri 'none'", "form-action 'none'"} {
			if !strings.Contains(csp+";", want) {
				t.Errorf("policy %q lacks %q", csp, want)
			}
		}
		if strings.Contains(csp, "unsafe") || strings.Contains(csp, "http") {
			t.Errorf("policy %q allows unsafe sources or another origin", csp)
		}
		if strings.Count(body, "<script") != strings.Count(body, `<script type="module" src="/console/`) || inlineHandler.MatchString(body) {
			t.Errorf("the page has inline script:\n%s", body)
		}
		for h, want := range map[string]string{"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff",
			"X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer"} {
			if got := resp.Header.Get(h); got != want {
				t.Errorf("%s: %q, want %q", h, got, want)
			}
		}
	}
	if nonces[0] == nonces[1] {
		t.Errorf("two pages had the same nonce %q", nonces[0])
	}
}

// TestAssets: the console's files with their types, revalidated by ETag
// (304); an unknown file, a file of the tree that is not served (MANIFEST,
// licences) and a directory are the API's 404.
func TestAssets(t *testing.T) {
	srv := serve(t)
	for path, ctype := range map[string]string{
		"/console/js/app.js":                  "text/javascript; charset=utf-8",
		"/console/vendor/xterm/xterm.mjs":     "text/javascript; charset=utf-8",
		"/console/vendor/xterm/xterm.css":     "text/css; charset=utf-8",
		"/console/style.css":                  "text/css; charset=utf-8",
		"/console/favicon.svg":                "image/svg+xml",
		"/console/vendor/xterm/addon-fit.mjs": "text/javascript; charset=utf-8",
	} {
		resp, body := get(t, srv.URL+path)
		etag := resp.Header.Get("ETag")
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != ctype || len(body) == 0 || etag == "" {
			t.Errorf("GET %s: %d %q etag %q, %d bytes", path, resp.StatusCode, resp.Header.Get("Content-Type"), etag, len(body))
			continue
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("Cache-Control") != "no-cache" {
			t.Errorf("GET %s: headers %v", path, resp.Header)
		}
		if again, _ := get(t, srv.URL+path, "If-None-Match", etag); again.StatusCode != http.StatusNotModified {
			t.Errorf("GET %s with its ETag: %d, want 304", path, again.StatusCode)
		}
		// Compressed for a browser that asks.
		gz, zbody := get(t, srv.URL+path, "Accept-Encoding", "br, gzip")
		if len(body) > 1024 {
			zr, err := gzip.NewReader(strings.NewReader(zbody))
			if gz.Header.Get("Content-Encoding") != "gzip" || err != nil {
				t.Errorf("GET %s gzip: %q, %v", path, gz.Header.Get("Content-Encoding"), err)
				continue
			}
			plain, err := io.ReadAll(zr)
			if err != nil || string(plain) != body || gz.Header.Get("ETag") == etag || len(zbody) >= len(body) {
				t.Errorf("GET %s gzip: %d bytes for %d, etag %q, %v", path, len(zbody), len(body), gz.Header.Get("ETag"), err)
			}
		} else if gz.Header.Get("Content-Encoding") != "" {
			t.Errorf("GET %s (%d bytes) compressed", path, len(body))
		}
	}
	for _, path := range []string{"/console/nope.js", "/console/vendor/MANIFEST", "/console/vendor/xterm/LICENSE",
		"/console/index.html", "/console/", "/console/js"} {
		resp, body := get(t, srv.URL+path)
		var e struct {
			Error struct{ Code, Message string }
		}
		if err := json.Unmarshal([]byte(body), &e); resp.StatusCode != http.StatusNotFound || err != nil || e.Error.Code != "not_found" {
			t.Errorf("GET %s: %d %s", path, resp.StatusCode, body)
		}
	}
}

// TestOnlyItsRoutes: the console takes GET / and GET /console/… only, so
// a mux that also holds the API's routes sends everything else to them.
func TestOnlyItsRoutes(t *testing.T) {
	mux := http.NewServeMux()
	var patterns []string
	console.New().Routes(func(p string, h http.Handler) { patterns = append(patterns, p); mux.Handle(p, h) })
	if strings.Join(patterns, " ") != "GET /{$} GET /console/{path...}" {
		t.Fatalf("patterns %q", patterns)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	for _, target := range []string{"/healthz", "/openapi.json", "/mcp", "/v1/computers", "/api/kernels", "/index.html", "/consoles"} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
		if rec.Code != http.StatusTeapot {
			t.Errorf("GET %s went to the console (%d)", target, rec.Code)
		}
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", nil))
	if rec.Code != http.StatusTeapot {
		t.Errorf("POST / went to the console (%d)", rec.Code)
	}
}
