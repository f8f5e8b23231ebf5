package e2b_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"strings"
	"testing"
)

// call does one request and answers its status and body.
func call(t *testing.T, method, url string, header map[string]string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// envelope is a Connect enveloped message of length n (data, or n zero
// bytes claimed).
func envelope(data []byte, n uint32) []byte {
	var hdr [5]byte
	binary.BigEndian.PutUint32(hdr[1:], n)
	return append(hdr[:], data...)
}

// TestE2BRefusals: what a client gets wrong is a 4xx (or a Connect error)
// naming it, and a sandbox that does not run is a 502, as E2B's proxy
// answers.
func TestE2BRefusals(t *testing.T) {
	t.Parallel()
	srv := newServer(t)
	url, secret := srv.url, srv.key(computerCaps)
	key := map[string]string{"X-API-Key": secret, "Content-Type": "application/json"}
	noComputers := map[string]string{"X-API-Key": srv.key(`{"files":{}}`)}
	for _, c := range []struct {
		name, method, path string
		header             map[string]string
		body               string
		status             int
		want               string
	}{
		{"no key", "GET", "/v2/sandboxes", nil, "", 401, `"code":401`},
		{"no computers", "GET", "/v2/sandboxes", noComputers, "", 403, "computer capability"},
		{"bad json", "POST", "/v2/sandboxes", key, `{"templateID":`, 400, "not the JSON expected"},
		{"envs at create", "POST", "/v2/sandboxes", key, `{"envVars":{"A":"b"}}`, 400, "pass envs to commands.run"},
		{"internet", "POST", "/v2/sandboxes", key, `{"allow_internet_access":true}`, 400, "network_policy"},
		{"unknown template", "POST", "/v2/sandboxes", key, `{"templateID":"no-such-template"}`, 400, "no-such-template"},
		{"bad timeout", "POST", "/v2/sandboxes", key, `{"timeout":-5}`, 400, "timeout must be"},
		{"bad state", "GET", "/v2/sandboxes?state=dead", key, "", 400, `state \"dead\"`},
		{"unknown route", "GET", "/templates", key, "", 404, "no such E2B route"},
		{"kill unknown", "DELETE", "/sandboxes/cmp_nope", key, "", 404, `"code":404`},
		{"no sandbox", "GET", "/health", map[string]string{"E2b-Sandbox-Id": "cmp_nope", "E2b-Sandbox-Port": "49983", "X-Access-Token": secret}, "", 502, "not running"},
		{"no token", "GET", "/health", map[string]string{"E2b-Sandbox-Id": "cmp_nope", "E2b-Sandbox-Port": "49983"}, "", 401, ""},
	} {
		status, body := call(t, c.method, url+c.path, c.header, []byte(c.body))
		if status != c.status || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s, want %d with %q", c.name, status, body, c.status, c.want)
		}
	}

	if status, body := call(t, "POST", url+"/v2/sandboxes", key, []byte(`{"templateID":"zz-none","templateID":"base"}`)); status != 400 || !strings.Contains(body, "duplicate field") {
		t.Errorf("a create with templateID twice: %d %s", status, body)
	}
	status, body := call(t, "POST", url+"/v2/sandboxes", key, []byte(`{"templateID":"base","timeout":60}`))
	var sb struct{ SandboxID, EnvdAccessToken, EnvdVersion string }
	if status != 201 || json.Unmarshal([]byte(body), &sb) != nil || sb.EnvdAccessToken != secret || sb.EnvdVersion == "" {
		t.Fatalf("create: %d %s", status, body)
	}
	box := func(port, ct string) map[string]string {
		return map[string]string{"E2b-Sandbox-Id": sb.SandboxID, "E2b-Sandbox-Port": port, "X-Access-Token": secret, "Content-Type": ct}
	}
	start := []byte(`{"process":{"cmd":"/bin/true"},"pty":{"size":{"cols":80,"rows":24}}}`)
	for _, c := range []struct {
		name, method, path string
		header             map[string]string
		body               []byte
		status             int
		want               string
	}{
		{"health", "GET", "/health", box("49983", ""), nil, 204, ""},
		{"wrong port", "GET", "/health", box("50005", ""), nil, 502, "49983"},
		{"protobuf", "POST", "/process.Process/List", box("49983", "application/proto"), nil, 501, `"code":"unimplemented"`},
		{"bad message", "POST", "/process.Process/List", box("49983", "application/json"), []byte(`[1]`), 400, `"code":"invalid_argument"`},
		{"key twice", "POST", "/filesystem.Filesystem/ListDir", box("49983", "application/json"), []byte(`{"path":"/workspace","path":"/etc"}`), 400, `duplicate field`},
		{"pty", "POST", "/process.Process/Start", box("49983", "application/connect+json"), envelope(start, uint32(len(start))), 200, "PTY"},
		{"huge message", "POST", "/process.Process/Start", box("49983", "application/connect+json"), envelope(nil, 2<<20), 200, "resource_exhausted"},
		{"cut message", "POST", "/process.Process/Start", box("49983", "application/connect+json"), envelope([]byte(`{}`), 10), 200, "cut short"},
		{"no cmd", "POST", "/process.Process/Start", box("49983", "application/connect+json"), envelope([]byte(`{}`), 2), 200, "process.cmd is required"},
		{"stream input", "POST", "/process.Process/StreamInput", box("49983", "application/connect+json"), nil, 501, "not supported"},
		{"kill no pid", "POST", "/process.Process/SendSignal", box("49983", "application/json"), []byte(`{"process":{"pid":99999},"signal":"SIGNAL_SIGKILL"}`), 404, `"code":"not_found"`},
		{"bad signal", "POST", "/process.Process/SendSignal", box("49983", "application/json"), []byte(`{"process":{"pid":1},"signal":"SIGNAL_SIGHUP"}`), 400, "SIGNAL_SIGKILL"},
		{"deep list", "POST", "/filesystem.Filesystem/ListDir", box("49983", "application/json"), []byte(`{"path":"/workspace","depth":100}`), 400, "depth is at most"},
		{"escape", "POST", "/filesystem.Filesystem/ListDir", box("49983", "application/json"), []byte(`{"path":"/etc"}`), 400, "escapes the workspace"},
		{"watch", "POST", "/filesystem.Filesystem/WatchDir", box("49983", "application/connect+json"), nil, 501, "not supported"},
		{"upload type", "POST", "/files?path=x", box("49983", "text/plain"), []byte("x"), 400, "multipart/form-data or application/octet-stream"},
		{"no path", "GET", "/files", box("49983", ""), nil, 400, "path is required"},
		{"not a file", "GET", "/files?path=/workspace", box("49983", ""), nil, 400, "directory"},
		{"language", "POST", "/execute", box("49999", "application/json"), []byte(`{"code":"1","language":"js"}`), 400, "python only"},
		{"execute on envd", "POST", "/execute", box("49983", "application/json"), []byte(`{"code":"1"}`), 502, "49999"},
	} {
		status, body := call(t, c.method, url+c.path, c.header, c.body)
		if status != c.status || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %q, want %d with %q", c.name, status, body, c.status, c.want)
		}
	}
	// A body cut before its Content-Length is the client's error on both
	// doors: it was a 413 "over 65536 bytes or unreadable" for one byte,
	// and a 500 on envd.
	for _, c := range []struct {
		path   string
		header map[string]string
		status int
		want   string
	}{
		{"/v2/sandboxes", key, 400, "could not be read"},
		{"/filesystem.Filesystem/ListDir", box("49983", "application/json"), 400, `"code":"invalid_argument"`},
	} {
		if status, body := cutRequest(t, url+c.path, c.header); status != c.status || !strings.Contains(body, c.want) {
			t.Errorf("a cut body on %s: %d %s, want %d with %q", c.path, status, body, c.status, c.want)
		}
	}
	// Another organisation's key finds no such sandbox, by either door.
	other := srv.otherOrgKey()
	if status, body := call(t, "GET", url+"/sandboxes/"+sb.SandboxID, map[string]string{"X-API-Key": other}, nil); status != 404 {
		t.Errorf("another organisation's get: %d %s", status, body)
	}
	if status, body := call(t, "GET", url+"/health", map[string]string{"E2b-Sandbox-Id": sb.SandboxID, "E2b-Sandbox-Port": "49983", "X-Access-Token": other}, nil); status != 502 {
		t.Errorf("another organisation's envd: %d %s", status, body)
	}
	if status, body := call(t, "DELETE", url+"/sandboxes/"+sb.SandboxID, key, nil); status != 204 {
		t.Errorf("kill: %d %s", status, body)
	}
	if status, body := call(t, "DELETE", url+"/sandboxes/"+sb.SandboxID, key, nil); status != 404 {
		t.Errorf("kill again: %d %s", status, body)
	}
}

// cutRequest POSTs to u a body that announces 1000 bytes, sends one and
// ends, and returns the answer.
func cutRequest(t *testing.T, u string, header map[string]string) (int, string) {
	t.Helper()
	pu, err := neturl.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", pu.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var req strings.Builder
	fmt.Fprintf(&req, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Length: 1000\r\n", pu.RequestURI(), pu.Host)
	for k, v := range header {
		fmt.Fprintf(&req, "%s: %s\r\n", k, v)
	}
	req.WriteString("\r\n{")
	c.Write([]byte(req.String()))
	c.(*net.TCPConn).CloseWrite()
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}
