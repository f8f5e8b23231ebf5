package httpapi_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/httpapi"
)

// hostGet sends GET path to the test server with the Host header host,
// without following redirects.
func (e *env) hostGet(host, path, key, cookie string) (*http.Response, string) {
	e.t.Helper()
	req, _ := http.NewRequest("GET", e.url+path, nil)
	req.Host = host
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if cookie != "" {
		req.Header.Set("Cookie", cookie)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 30 * time.Second}
	res, err := c.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

// With server.preview_domain, <port>-<id>.<domain> is that port of that
// computer at its root (absolute paths work), with the key or a preview
// link (its cookie scoped to the host); nothing else is served there, not
// the API; other hosts are the API as before.
func TestPreviewHost(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.rewire(func(o *httpapi.Options) { o.PreviewDomain = "Preview.Test" })
	id := e.create(e.admin, nil).ID
	_, port, _ := strings.Cut(strings.TrimPrefix(e.url, "http://"), ":")
	dashed := strings.Replace(id, "_", "-", 1)
	host := "8000-" + dashed + ".preview.test:" + port
	if r := e.do(e.admin, "PUT", "/v1/computers/"+id+"/files/site/static/app.js", "console.log(42)"); r.code/100 != 2 {
		t.Fatalf("put: %s", r)
	}
	e.startProc(e.admin, id, map[string]any{"argv": []string{"/usr/bin/python3", "-m", "http.server", "8000"}, "cwd": "/workspace/site"})
	eventually(t, 20*time.Second, "port 8000 answers", func() bool {
		res, _ := e.hostGet(host, "/static/app.js", e.admin, "")
		return res.StatusCode == 200
	})

	res, body := e.hostGet(host, "/static/app.js", e.admin, "")
	if res.StatusCode != 200 || body != "console.log(42)" || !strings.HasPrefix(res.Header.Get("Server"), "SimpleHTTP") {
		t.Fatalf("an absolute path on the preview host: %d %q %v", res.StatusCode, body, res.Header)
	}
	if res, body := e.hostGet("8000-"+id+".preview.test", "/static/app.js", e.admin, ""); res.StatusCode != 200 || body != "console.log(42)" {
		t.Fatalf("the id with its underscore: %d %q", res.StatusCode, body)
	}
	// The API is not served on a preview host: this goes to the app.
	if res, body := e.hostGet(host, "/v1/computers", e.admin, ""); res.StatusCode != 404 || strings.Contains(body, `"object"`) ||
		!strings.HasPrefix(res.Header.Get("Server"), "SimpleHTTP") {
		t.Fatalf("the API on a preview host: %d %q", res.StatusCode, body)
	}
	if res, _ := e.hostGet(host, "/static/app.js", "", ""); res.StatusCode != 401 {
		t.Fatalf("no key: %d", res.StatusCode)
	}
	for h, code := range map[string]int{
		"x-" + dashed + ".preview.test":     404, // no port
		"8000-cmp-nope.preview.test":        404, // no such computer
		"8001-" + dashed + ".preview.test":  502, // nothing listens
		"70000-" + dashed + ".preview.test": 404,
	} {
		if res, body := e.hostGet(h, "/", e.admin, ""); res.StatusCode != code {
			t.Errorf("host %s: %d %s, want %d", h, res.StatusCode, body, code)
		}
	}
	_, other := e.newKey(e.newOrg("b", true), computerCaps)
	if res, _ := e.hostGet(host, "/", other, ""); res.StatusCode != 404 {
		t.Fatalf("another organisation's key: %d", res.StatusCode)
	}
	// Another host is the API as ever.
	if r := e.do(e.admin, "GET", "/v1/computers/"+id, nil); r.code != 200 {
		t.Fatalf("the API: %s", r)
	}

	// A preview link names the preview host; its token becomes a cookie
	// of that host, and works for that port only.
	r := e.do(e.admin, "POST", "/v1/computers/"+id+"/links", map[string]any{"port": 8000})
	var link struct {
		URL   string `json:"url"`
		Token string `json:"token"`
	}
	r.json(t, &link)
	u, err := url.Parse(link.URL)
	if err != nil || u.Host != host || u.Path != "/" || u.Query().Get("cubicle_token") != link.Token {
		t.Fatalf("link url %q, want the host %s", link.URL, host)
	}
	res, _ = e.hostGet(host, "/static/app.js?cubicle_token="+link.Token, "", "")
	ck := res.Header.Get("Set-Cookie")
	if res.StatusCode != http.StatusFound || res.Header.Get("Location") != "/static/app.js" || !strings.Contains(ck, "Path=/;") ||
		strings.Contains(ck, "Domain=") {
		t.Fatalf("the link: %d %v", res.StatusCode, res.Header)
	}
	cookie, _, _ := strings.Cut(ck, ";")
	if res, body := e.hostGet(host, "/static/app.js", "", cookie); res.StatusCode != 200 || body != "console.log(42)" {
		t.Fatalf("with the link's cookie: %d %q", res.StatusCode, body)
	}
	if res, _ := e.hostGet("8001-"+dashed+".preview.test", "/", "", cookie); res.StatusCode != 401 {
		t.Fatalf("the link's cookie on another port: %d", res.StatusCode)
	}
	if res, _ := e.hostGet(strings.TrimPrefix(e.url, "http://"), "/v1/computers", "", cookie); res.StatusCode != 401 {
		t.Fatalf("the link's cookie on the API: %d", res.StatusCode)
	}
}
