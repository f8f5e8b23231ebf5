package console

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
	"github.com/cubicle-sandbox/cubicle/internal/errdefs/errhttp"
)

//go:embed static
var static embed.FS

// Prefix is the path the console's files are served under.
const Prefix = "/console/"

// noncePlaceholder is replaced in index.html by each response's nonce.
const noncePlaceholder = "__CSP_NONCE__"

// contentTypes are the types of the files the console serves; a file of
// another kind is not served.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".mjs":  "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
}

// asset is one file of the console, read once; gzipped the first time a
// browser asks for it compressed.
type asset struct {
	body  []byte
	ctype string
	etag  string
	gz    func() []byte
}

// Console serves the web console. It is an httpapi.Mount.
type Console struct {
	index  []byte
	assets map[string]asset // by path below Prefix
}

// New reads the embedded files. It panics if they are not what the
// package was built with (a programming error, caught by every test).
func New() *Console {
	c := &Console{assets: map[string]asset{}}
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		ctype, ok := contentTypes[path.Ext(p)]
		if !ok {
			return nil // MANIFEST, licences: kept in the tree, not served
		}
		body, err := static.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		c.assets[strings.TrimPrefix(p, "static/")] = asset{body: body, ctype: ctype, etag: hex.EncodeToString(sum[:12]),
			gz: sync.OnceValue(func() []byte { return gzipped(body) })}
		return nil
	})
	if err != nil {
		panic("console: reading the embedded files: " + err.Error())
	}
	idx, ok := c.assets["index.html"]
	if !ok || !bytes.Contains(idx.body, []byte(noncePlaceholder)) {
		panic("console: the embedded index.html is missing or has no nonce placeholder")
	}
	c.index = idx.body
	delete(c.assets, "index.html") // served at / only, with its nonce
	return c
}

// Routes registers GET / (exactly: every other path stays the API's) and
// GET /console/{path...}.
func (c *Console) Routes(handle func(pattern string, h http.Handler)) {
	handle("GET /{$}", http.HandlerFunc(c.serveIndex))
	handle("GET "+Prefix+"{path...}", http.HandlerFunc(c.serveAsset))
}

// policy is the page's Content-Security-Policy for a nonce.
func policy(nonce string) string {
	return strings.Join([]string{
		"default-src 'none'",
		"script-src 'self'",
		"style-src 'self' 'nonce-" + nonce + "'",
		"img-src 'self' data:",
		"connect-src 'self'",
		"font-src 'self'",
		"base-uri 'none'",
		"form-action 'none'",
		"frame-ancestors 'none'",
	}, "; ")
}

// secure sets the headers every console response carries.
func secure(h http.Header) {
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=(), payment=(), usb=()")
}

func (c *Console) serveIndex(w http.ResponseWriter, r *http.Request) {
	var b [18]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	nonce := base64.StdEncoding.EncodeToString(b[:])
	h := w.Header()
	secure(h)
	h.Set("Content-Security-Policy", policy(nonce))
	h.Set("Content-Type", contentTypes[".html"])
	h.Set("Cache-Control", "no-store")
	body := bytes.ReplaceAll(c.index, []byte(noncePlaceholder), []byte(nonce))
	http.ServeContent(w, r, "index.html", time.Time{}, bytes.NewReader(body))
}

// serveAsset answers a file with its ETag: browsers revalidate (no-cache)
// and get 304 while the binary is the same.
func (c *Console) serveAsset(w http.ResponseWriter, r *http.Request) {
	a, ok := c.assets[r.PathValue("path")]
	if !ok {
		errhttp.WriteOpenAI(w, r, errdefs.New(errdefs.NotFound, "", ""), "no console file "+r.URL.Path)
		return
	}
	h := w.Header()
	secure(h)
	h.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
	h.Set("Content-Type", a.ctype)
	h.Set("Cache-Control", "no-cache")
	h.Set("Vary", "Accept-Encoding")
	body, etag := a.body, a.etag
	if acceptsGzip(r) && len(body) > 1024 {
		body, etag = a.gz(), etag+"-gz"
		h.Set("Content-Encoding", "gzip")
	}
	h.Set("ETag", `"`+etag+`"`)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
}

// acceptsGzip reports whether the request's Accept-Encoding lists gzip
// (without q=0).
func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(coding), "gzip") {
			q := strings.ReplaceAll(params, " ", "")
			return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
		}
	}
	return false
}

func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression) // a valid level: no error
	zw.Write(b)                                              // into memory: no error
	zw.Close()
	return buf.Bytes()
}
