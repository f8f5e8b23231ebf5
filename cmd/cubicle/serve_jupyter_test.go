package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestServeJupyter: 'cubicle serve' serves the Jupyter Kernel Gateway API on
// its listener: a kernel runs 1+1 over the channels WebSocket and is shut
// down; CUBICLE_JUPYTER_ENABLED=false turns the API off.
func TestServeJupyter(t *testing.T) {
	dir := t.TempDir()
	gcAfter(t, dir)
	s := startServer(t, dir, serveEnv("CUBICLE_ADMIN_KEY="+serveAdminKey))
	var specs struct {
		Default string `json:"default"`
	}
	s.decode("GET", "/api/kernelspecs", "", http.StatusOK, &specs)
	if specs.Default != "python3" {
		t.Fatalf("kernelspecs default %q", specs.Default)
	}
	var k struct {
		ID string `json:"id"`
	}
	s.decode("POST", "/api/kernels", `{"name":"python3"}`, http.StatusCreated, &k)
	// A wrong method on a Kernel Gateway route is 405 with Allow, never 404.
	for _, c := range []struct{ method, path, allow string }{
		{"PUT", "/api/kernels", "GET, HEAD, POST"},
		{"PATCH", "/api/kernels/" + k.ID, "GET, HEAD, DELETE"},
		{"GET", "/api/kernels/" + k.ID + "/interrupt", "POST"},
		{"DELETE", "/api/kernelspecs", "GET, HEAD"},
	} {
		if r := s.do(c.method, c.path, ""); r.code != http.StatusMethodNotAllowed || r.hdr.Get("Allow") != c.allow {
			t.Errorf("%s %s: %d (Allow %q) %s, want 405 with Allow %q", c.method, c.path, r.code, r.hdr.Get("Allow"), r.body, c.allow)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	u := "ws" + strings.TrimPrefix(s.url, "http") + "/api/kernels/" + k.ID + "/channels?token=" + s.key
	ws, _, err := websocket.Dial(ctx, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	req := `{"channel":"shell","header":{"msg_id":"m1","msg_type":"execute_request","session":"s","username":"t","version":"5.3"},` +
		`"parent_header":{},"metadata":{},"content":{"code":"1+1","silent":false,"allow_stdin":false}}`
	if err := ws.Write(ctx, websocket.MessageText, []byte(req)); err != nil {
		t.Fatal(err)
	}
	for result := ""; result != "2"; {
		_, b, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("waiting for 1+1: %v\n%s", err, s.stderr)
		}
		var m struct {
			MsgType string `json:"msg_type"`
			Content struct {
				Data map[string]string `json:"data"`
			} `json:"content"`
		}
		if json.Unmarshal(b, &m) == nil && m.MsgType == "execute_result" {
			result = m.Content.Data["text/plain"]
		}
	}
	ws.Close(websocket.StatusNormalClosure, "")
	s.decode("DELETE", "/api/kernels/"+k.ID, "", http.StatusNoContent, nil)
	s.stop()

	off := startServer(t, dir, serveEnv("CUBICLE_ADMIN_KEY="+serveAdminKey, "CUBICLE_JUPYTER_ENABLED=false"))
	if r := off.do("GET", "/api/kernelspecs", ""); r.code != http.StatusNotFound {
		t.Fatalf("with the API off: %d %s", r.code, r.body)
	}
	off.stop()
}
