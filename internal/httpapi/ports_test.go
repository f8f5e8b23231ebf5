package httpapi_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// portServers are python servers for the port proxy's tests: on 8001 an
// HTTP server that answers a POST with its body's length and sha256 and
// the headers it got (below /early it sends the answer's headers before
// it reads the body); on 8765 a WebSocket echo server (RFC 6455 by hand:
// Debian's python3 has no WebSocket module).
const portServers = `
import base64, hashlib, http.server, json, socket, struct, threading
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        early = self.path.startswith("/early")
        if early:  # the answer's headers before the body is read
            self.send_response(200); self.send_header("Content-Type", "application/json")
            self.send_header("Connection", "close"); self.end_headers(); self.wfile.flush()
        n, h = 0, hashlib.sha256()
        if self.headers.get("Transfer-Encoding") == "chunked":
            while True:
                size = int(self.rfile.readline().strip(), 16)
                if size == 0:
                    self.rfile.readline(); break
                b = self.rfile.read(size); self.rfile.readline(); n += len(b); h.update(b)
        else:
            left = int(self.headers.get("Content-Length", "0"))
            while left:
                b = self.rfile.read(min(left, 65536)); left -= len(b); n += len(b); h.update(b)
        out = json.dumps({"len": n, "sha256": h.hexdigest(), "path": self.path,
            "headers": {k: v for k, v in self.headers.items()}}).encode()
        if early:
            self.wfile.write(out); self.close_connection = True; return
        self.send_response(200); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out))); self.end_headers(); self.wfile.write(out)
    def log_message(self, *a): pass
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 8001), H)
threading.Thread(target=srv.serve_forever, daemon=True).start()

def ws(c):
    f = c.makefile("rb")
    key = None
    while True:
        line = f.readline().decode()
        if line in ("\r\n", ""): break
        k, _, v = line.partition(":")
        if k.strip().lower() == "sec-websocket-key": key = v.strip()
    acc = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
    c.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + acc + "\r\n\r\n").encode())
    while True:
        h = f.read(2)
        if len(h) < 2: break
        op, n = h[0] & 15, h[1] & 127
        if n == 126: n = struct.unpack(">H", f.read(2))[0]
        elif n == 127: n = struct.unpack(">Q", f.read(8))[0]
        mask = f.read(4) if h[1] & 128 else b"\0\0\0\0"
        data = bytes(b ^ mask[i % 4] for i, b in enumerate(f.read(n)))
        if op == 8:
            c.sendall(b"\x88\x02" + data[:2]); break
        hdr = bytes([0x80 | op])
        hdr += bytes([len(data)]) if len(data) < 126 else (b"\x7e" + struct.pack(">H", len(data)) if len(data) < 65536 else b"\x7f" + struct.pack(">Q", len(data)))
        c.sendall(hdr + data)
    c.close()
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 8765)); s.listen(8)
while True:
    c, _ = s.accept()
    threading.Thread(target=ws, args=(c,), daemon=True).start()
`

func TestPortProxy(t *testing.T) {
	e := newEnv(t, nil)
	id := e.create(e.admin, nil).ID
	base := "/v1/computers/" + id + "/ports/"
	file := make([]byte, 300<<10)
	rand.Read(file)
	if r := e.do(e.admin, "PUT", "/v1/computers/"+id+"/files/site/data.bin", file); r.code/100 != 2 {
		t.Fatalf("put file: %s", r)
	}
	if r := e.do(e.admin, "PUT", "/v1/computers/"+id+"/files/servers.py", portServers); r.code/100 != 2 {
		t.Fatalf("put file: %s", r)
	}
	e.startProc(e.admin, id, map[string]any{"argv": []string{"/usr/bin/python3", "-m", "http.server", "8000"}, "cwd": "/workspace/site"})
	e.startProc(e.admin, id, map[string]any{"argv": []string{"/usr/bin/python3", "/workspace/servers.py"}})

	eventually(t, 20*time.Second, "ports 8000, 8001 and 8765 listen", func() bool {
		r := e.do(e.admin, "GET", "/v1/computers/"+id+"/ports", nil)
		if r.code != 200 {
			t.Fatalf("GET ports: %s", r)
		}
		var list struct {
			Data []struct {
				Port    int    `json:"port"`
				Address string `json:"address"`
			} `json:"data"`
		}
		r.json(t, &list)
		seen := map[int]string{}
		for _, p := range list.Data {
			seen[p.Port] = p.Address
		}
		return seen[8000] != "" && seen[8001] == "127.0.0.1" && seen[8765] == "127.0.0.1"
	})

	t.Run("directory and file", func(t *testing.T) {
		r := e.do(e.admin, "GET", base+"8000/", nil)
		if r.code != 200 || !bytes.Contains(r.body, []byte(`href="data.bin"`)) {
			t.Fatalf("directory listing: %s", r)
		}
		r = e.do(e.admin, "GET", base+"8000/data.bin", nil)
		if r.code != 200 || !bytes.Equal(r.body, file) {
			t.Fatalf("file through the proxy: %d, %d bytes, equal %v", r.code, len(r.body), bytes.Equal(r.body, file))
		}
		r = e.do(e.admin, "GET", "/v1/computers/"+id+"/ports/8000", nil) // redirected to the directory
		if r.code != 200 || !bytes.Contains(r.body, []byte("data.bin")) {
			t.Fatalf("without the slash: %s", r)
		}
	})

	t.Run("post streamed", func(t *testing.T) {
		body := make([]byte, 5<<20)
		rand.Read(body)
		sum := sha256.Sum256(body)
		pr, pw := io.Pipe()
		go func() { // chunked: the proxy cannot know the length in advance
			for b := body; len(b) > 0; b = b[min(len(b), 100_000):] {
				pw.Write(b[:min(len(b), 100_000)])
			}
			pw.Close()
		}()
		r := e.doCtx(context.Background(), e.admin, "POST", base+"8001/up/load?x=1&cubicle_token=zzz", pr,
			map[string]string{"X-Cubicle-Secret": "s", "Cookie": "a=1; cubicle_link=tok; b=2"})
		if r.code != 200 {
			t.Fatalf("POST: %s", r)
		}
		var got struct {
			Len     int               `json:"len"`
			Sha256  string            `json:"sha256"`
			Path    string            `json:"path"`
			Headers map[string]string `json:"headers"`
		}
		r.json(t, &got)
		if got.Len != len(body) || got.Sha256 != hex.EncodeToString(sum[:]) {
			t.Fatalf("the server got %d bytes (%s), want %d", got.Len, got.Sha256, len(body))
		}
		if got.Path != "/up/load?x=1" {
			t.Errorf("path upstream %q, want /up/load?x=1", got.Path)
		}
		h := got.Headers
		if h["Authorization"] != "" || h["X-Cubicle-Secret"] != "" || h["Cookie"] != "a=1; b=2" {
			t.Errorf("Cubicle's credentials reached the app: %v", h)
		}
		if h["Host"] != "127.0.0.1:8001" || h["X-Forwarded-Host"] == "" || h["X-Forwarded-Proto"] != "http" ||
			h["X-Forwarded-Prefix"] != "/v1/computers/"+id+"/ports/8001" || h["X-Forwarded-For"] == "" {
			t.Errorf("forwarding headers: %v", h)
		}
	})

	// An app that answers before it has read the body (a stream of
	// progress while an upload comes in) gets the whole body. Without
	// full duplex the server drained the body at the answer's first flush,
	// taking from the app what it had not read yet.
	t.Run("post answered early", func(t *testing.T) {
		body := make([]byte, 1<<20)
		rand.Read(body)
		sum := sha256.Sum256(body)
		pr, pw := io.Pipe()
		go func() {
			time.Sleep(300 * time.Millisecond) // the answer's headers are out first
			pw.Write(body)
			pw.Close()
		}()
		r := e.doCtx(context.Background(), e.admin, "POST", base+"8001/early", pr, nil)
		var got struct {
			Len    int    `json:"len"`
			Sha256 string `json:"sha256"`
		}
		if r.code != 200 {
			t.Fatalf("POST: %s", r)
		}
		r.json(t, &got)
		if got.Len != len(body) || got.Sha256 != hex.EncodeToString(sum[:]) {
			t.Fatalf("the app got %d bytes (%s), want %d", got.Len, got.Sha256, len(body))
		}
	})

	t.Run("websocket", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(e.url, "http")+base+"8765/",
			&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + e.admin}}})
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		defer c.CloseNow()
		c.SetReadLimit(1 << 20)
		for _, msg := range []string{"hello", strings.Repeat("x", 200_000)} {
			if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
				t.Fatal(err)
			}
			_, b, err := c.Read(ctx)
			if err != nil || string(b) != msg {
				t.Fatalf("echo of %d bytes: %d bytes, %v", len(msg), len(b), err)
			}
		}
		c.Close(websocket.StatusNormalClosure, "")
	})

	t.Run("auth", func(t *testing.T) {
		e.do("", "GET", base+"8000/", nil).wantError(t, 401, "")
		e.do("cub_wrong", "GET", base+"8000/", nil).wantError(t, 401, "")
		_, other := e.newKey(e.newOrg("other", true), computerCaps)
		e.do(other, "GET", base+"8000/data.bin", nil).wantError(t, 404, "")
		e.do(other, "GET", "/v1/computers/"+id+"/ports", nil).wantError(t, 404, "")
		e.do(other, "POST", "/v1/computers/"+id+"/links", map[string]any{"port": 8000}).wantError(t, 404, "")
	})

	t.Run("bad ports", func(t *testing.T) {
		e.do(e.admin, "GET", base+"8002/", nil).wantError(t, 502, "port_refused")
		for _, p := range []string{"0", "65536", "abc", "-1"} {
			e.do(e.admin, "GET", base+p+"/", nil).wantError(t, 400, "")
		}
	})

	t.Run("host unreachable", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "host secret") }))
		port := ln.Addr().(*net.TCPAddr).Port
		r := e.do(e.admin, "GET", fmt.Sprintf("%s%d/", base, port), nil)
		if bytes.Contains(r.body, []byte("host secret")) {
			t.Fatalf("the proxy reached the host's 127.0.0.1:%d: %s", port, r)
		}
		r.wantError(t, 502, "port_refused")
	})

	t.Run("link", func(t *testing.T) {
		r := e.do(e.admin, "POST", "/v1/computers/"+id+"/links", map[string]any{"port": 8000, "expires_in_seconds": 600})
		if r.code != 201 {
			t.Fatalf("create link: %s", r)
		}
		var link struct {
			ID        string    `json:"id"`
			URL       string    `json:"url"`
			Token     string    `json:"token"`
			ExpiresAt time.Time `json:"expires_at"`
		}
		r.json(t, &link)
		if !strings.HasPrefix(link.URL, e.url+base+"8000/?cubicle_token=") || link.Token == "" ||
			time.Until(link.ExpiresAt) < 9*time.Minute || time.Until(link.ExpiresAt) > 11*time.Minute {
			t.Fatalf("link: %s", r)
		}
		jar, _ := cookiejar.New(nil)
		browser := &http.Client{Jar: jar}
		get := func(u string) (int, []byte) {
			res, err := browser.Get(u)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			return res.StatusCode, b
		}
		if code, b := get(link.URL); code != 200 || !bytes.Contains(b, []byte("data.bin")) {
			t.Fatalf("the link without a key: %d %s", code, b)
		}
		if code, b := get(e.url + base + "8000/data.bin"); code != 200 || !bytes.Equal(b, file) { // by its cookie
			t.Fatalf("a file by the link's cookie: %d, %d bytes", code, len(b))
		}
		if code, _ := get(e.url + base + "8001/?cubicle_token=" + link.Token); code != 401 {
			t.Fatalf("the link on another port: %d, want 401", code)
		}
		if code, _ := get(e.url + "/v1/computers/" + id + "/ports"); code != 401 {
			t.Fatalf("the link's cookie on the API: %d, want 401", code)
		}
		r = e.do(e.admin, "GET", "/v1/computers/"+id+"/links", nil)
		if r.code != 200 || !bytes.Contains(r.body, []byte(link.ID)) || bytes.Contains(r.body, []byte(link.Token)) ||
			!bytes.Contains(r.body, []byte(`"has_more":false`)) || !bytes.Contains(r.body, []byte(`"first_id":"`+link.ID+`"`)) {
			t.Fatalf("list links: %s", r)
		}
		if r := e.do(e.admin, "DELETE", "/v1/computers/"+id+"/links/"+link.ID, nil); r.code != 200 {
			t.Fatalf("delete link: %s", r)
		}
		if code, _ := get(e.url + base + "8000/data.bin"); code != 401 {
			t.Fatalf("the deleted link's cookie: %d, want 401", code)
		}
		if code, _ := get(link.URL); code != 401 {
			t.Fatalf("the deleted link: %d, want 401", code)
		}
		// Expiry.
		r = e.do(e.admin, "POST", "/v1/computers/"+id+"/links", map[string]any{"port": 8000, "expires_in_seconds": 1})
		r.json(t, &link)
		time.Sleep(1100 * time.Millisecond)
		if code, _ := get(link.URL); code != 401 {
			t.Fatalf("the expired link: %d, want 401", code)
		}
		e.do(e.admin, "POST", "/v1/computers/"+id+"/links", map[string]any{"port": 0}).wantError(t, 400, "")
	})
}
