package jupyter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/store/sqlite"
)

// fakeEnv is the gateway on a real store and computer manager over the
// fake driver, behind a real HTTP server.
type fakeEnv struct {
	t   *testing.T
	url string
	srv *Server
	mgr *computer.Manager
	gov *governance.Service
	drv *fakeDriver
	key string // a key of the default org that may use computers
}

func newFakeEnv(t *testing.T, cfg Config) *fakeEnv {
	t.Helper()
	drv := newFakeDriver()
	key := "cub_kgw_test_key_000001"
	g := serveGateway(t, cfg, t.TempDir(), key, drv, computer.Config{Memory: 256 << 20, Pids: 128, CPUs: 1, Disk: 32 << 20, Lifetime: 600 * time.Second,
		ExecTimeout: 30 * time.Second, MaxConcurrent: 8, MemoryBudget: 8 << 30, MaxFileBytes: 1 << 20, MaxOutputBytes: 1 << 20})
	return &fakeEnv{t: t, url: g.url, srv: g.srv, mgr: g.mgr, gov: g.gov, drv: drv, key: key}
}

// servedGateway is the gateway on a real store and computer manager,
// behind a real HTTP server.
type servedGateway struct {
	url string
	srv *Server
	mgr *computer.Manager
	gov *governance.Service
}

// serveGateway serves the gateway configured by cfg over a manager of drv
// with the limits lim, on a new store in dir bootstrapped with key; all of
// it is closed when the test ends.
func serveGateway(t *testing.T, cfg Config, dir, key string, drv sandbox.Driver, lim computer.Config) servedGateway {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "cubicle.db"))
	if err != nil {
		t.Fatal(err)
	}
	gov := governance.New(st)
	if _, err := gov.Bootstrap(ctx, key); err != nil {
		t.Fatal(err)
	}
	mgr := computer.New(lim, drv, st, gov)
	if err := mgr.Start(ctx); err != nil {
		t.Fatal(err)
	}
	s := New(cfg, mgr, gov)
	mux := http.NewServeMux()
	s.Routes(mux.Handle)
	hs := httptest.NewUnstartedServer(mux)
	hs.Config.ConnContext = ConnContext
	hs.Start()
	t.Cleanup(func() {
		s.Close(context.Background())
		hs.CloseClientConnections()
		hs.Close()
		mgr.Close(context.Background())
		st.Close()
	})
	return servedGateway{url: hs.URL, srv: s, mgr: mgr, gov: gov}
}

// newKey makes a key in a new organisation.
func (e *fakeEnv) newKey(allowComputer bool, caps governance.Capabilities) string {
	e.t.Helper()
	ctx := context.Background()
	org, err := e.gov.CreateOrg(ctx, "other", governance.OrgSettings{AllowComputer: &allowComputer})
	if err != nil {
		e.t.Fatal(err)
	}
	_, secret, err := e.gov.CreateKey(ctx, org.ID, "k", caps)
	if err != nil {
		e.t.Fatal(err)
	}
	return secret
}

type httpResp struct {
	code int
	body []byte
	hdr  http.Header
}

func (r httpResp) String() string { return fmt.Sprintf("%d %s", r.code, bytes.TrimSpace(r.body)) }

// do sends a request with "Authorization: <auth>" (none when auth is "").
func doReq(t *testing.T, base, auth, method, path string, body any) httpResp {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, base+path, rd)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return httpResp{res.StatusCode, b, res.Header}
}

func (e *fakeEnv) do(method, path string, body any) httpResp {
	return doReq(e.t, e.url, "token "+e.key, method, path, body)
}

// start starts a kernel and returns its model.
func startKernel(t *testing.T, base, key string, env map[string]string) model {
	t.Helper()
	r := doReq(t, base, "token "+key, "POST", "/api/kernels", map[string]any{"name": "python3", "env": env})
	if r.code != http.StatusCreated {
		t.Fatalf("POST /api/kernels: %s", r)
	}
	var m model
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// wsClient is a raw channels WebSocket.
type wsClient struct {
	t    *testing.T
	c    *websocket.Conn
	sess string
	n    int
	v1   bool // the server selected SubprotocolV1: every frame is a v1 binary frame
}

// dialChannels opens the kernel's channels WebSocket, offering subprotocols.
func dialChannels(t *testing.T, base, key, kernelID string, subprotocols ...string) *wsClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u := "ws" + strings.TrimPrefix(base, "http") + "/api/kernels/" + kernelID + "/channels"
	h := http.Header{}
	h.Set("Authorization", "token "+key)
	c, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: h, Subprotocols: subprotocols})
	if err != nil {
		t.Fatalf("dial channels: %v", err)
	}
	c.SetReadLimit(64 << 20)
	t.Cleanup(func() { c.CloseNow() })
	return &wsClient{t: t, c: c, sess: fmt.Sprintf("s%p", c), v1: c.Subprotocol() == SubprotocolV1}
}

// wsMsg is a message as the gateway sends it.
type wsMsg struct {
	Channel string `json:"channel"`
	Header  struct {
		MsgID   string `json:"msg_id"`
		MsgType string `json:"msg_type"`
	} `json:"header"`
	MsgID        string `json:"msg_id"`
	MsgType      string `json:"msg_type"`
	ParentHeader struct {
		MsgID string `json:"msg_id"`
	} `json:"parent_header"`
	Content json.RawMessage `json:"content"`
	Buffers [][]byte        `json:"-"`
	binary  bool
}

// send writes a request and returns its msg_id.
func (w *wsClient) send(channel, msgType string, content any, parent string) string {
	w.t.Helper()
	w.n++
	id := fmt.Sprintf("%s-%d", w.sess, w.n)
	ph := "{}"
	if parent != "" {
		ph = fmt.Sprintf(`{"msg_id":%q}`, parent)
	}
	c, _ := json.Marshal(content)
	hdr := fmt.Sprintf(`{"msg_id":%q,"msg_type":%q,"session":%q,"username":"t","date":"2026-01-01T00:00:00.000Z","version":"5.3"}`,
		id, msgType, w.sess)
	if w.v1 {
		w.write(websocket.MessageBinary, encodeV1(sandbox.KernelMessage{Channel: channel, Header: json.RawMessage(hdr),
			ParentHeader: json.RawMessage(ph), Metadata: json.RawMessage("{}"), Content: c}))
		return id
	}
	frame := fmt.Sprintf(`{"channel":%q,"header":%s,"parent_header":%s,"metadata":{},"content":%s,"buffers":[]}`, channel, hdr, ph, c)
	w.write(websocket.MessageText, []byte(frame))
	return id
}

// write sends one frame as it is.
func (w *wsClient) write(typ websocket.MessageType, frame []byte) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.c.Write(ctx, typ, frame); err != nil {
		w.t.Fatal(err)
	}
}

// read returns the next message (binary frames decoded; on a v1
// connection, anything but a v1 binary frame is an error).
func (w *wsClient) read(timeout time.Duration) (wsMsg, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	typ, data, err := w.c.Read(ctx)
	if err != nil {
		return wsMsg{}, err
	}
	if w.v1 {
		return readV1(typ, data)
	}
	var m wsMsg
	jsonPart := data
	if typ == websocket.MessageBinary {
		var bufs [][]byte
		if jsonPart, bufs, err = splitBinary(data); err != nil {
			return m, err
		}
		m.Buffers, m.binary = bufs, true
	}
	if err := json.Unmarshal(jsonPart, &m); err != nil {
		return m, fmt.Errorf("%w: %s", err, jsonPart)
	}
	return m, nil
}

// readV1 decodes a v1 frame into the message's fields.
func readV1(typ websocket.MessageType, data []byte) (wsMsg, error) {
	if typ != websocket.MessageBinary {
		return wsMsg{}, fmt.Errorf("a %v frame on a v1 connection: %.200s", typ, data)
	}
	cm, bufs, err := decodeV1(data)
	if err != nil {
		return wsMsg{}, err
	}
	m := wsMsg{Channel: cm.Channel, Content: cm.Content, Buffers: bufs, binary: true}
	if err := errors.Join(json.Unmarshal(cm.Header, &m.Header), json.Unmarshal(cm.ParentHeader, &m.ParentHeader)); err != nil {
		return wsMsg{}, fmt.Errorf("v1 frame: %w", err)
	}
	m.MsgID, m.MsgType = m.Header.MsgID, m.Header.MsgType
	return m, nil
}

// until reads messages until one of type msgType answers parent.
func (w *wsClient) until(msgType, parent string) (wsMsg, []wsMsg) {
	w.t.Helper()
	var seen []wsMsg
	for {
		m, err := w.read(10 * time.Second)
		if err != nil {
			w.t.Fatalf("waiting for %s: %v (seen %d)", msgType, err, len(seen))
		}
		seen = append(seen, m)
		if m.Header.MsgType == msgType && m.ParentHeader.MsgID == parent {
			return m, seen
		}
	}
}

func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func mustCaps() governance.Capabilities { return governance.AllCapabilities() }

// execute runs code and returns every message of the request once both
// its execute_reply and the iopub idle arrived (the Jupyter rule).
func (w *wsClient) execute(code string, allowStdin bool) (reply wsMsg, seen []wsMsg) {
	w.t.Helper()
	return w.finish(w.sendExecute(code, allowStdin))
}

// sendExecute sends an execute_request with every field ipykernel reads
// (it ignores a request without "silent") and returns its msg_id.
// stop_on_error is off: with it, ipykernel aborts a request that arrives
// right after an error (a race the tests must not depend on).
func (w *wsClient) sendExecute(code string, allowStdin bool) string {
	w.t.Helper()
	return w.send("shell", "execute_request", map[string]any{"code": code, "silent": false, "store_history": true,
		"user_expressions": map[string]any{}, "allow_stdin": allowStdin, "stop_on_error": false}, "")
}

// finish reads the messages of request id until it is complete.
func (w *wsClient) finish(id string) (reply wsMsg, seen []wsMsg) {
	w.t.Helper()
	replied, idle := false, false
	var others []wsMsg
	for !replied || !idle {
		m, err := w.read(60 * time.Second)
		if err != nil {
			w.t.Fatalf("request %s: %v; its messages: %s\nothers: %s", id, err, dump(seen), dump(others))
		}
		if m.ParentHeader.MsgID != id {
			others = append(others, m)
			continue
		}
		seen = append(seen, m)
		switch {
		case m.Header.MsgType == "execute_reply":
			reply, replied = m, true
		case m.Header.MsgType == "status" && strings.Contains(string(m.Content), `"idle"`):
			idle = true
		}
	}
	return reply, seen
}

// status is an execute_reply's status.
func (m wsMsg) status() string {
	var c struct{ Status string }
	json.Unmarshal(m.Content, &c)
	return c.Status
}

// stdout joins the stdout stream text among msgs.
func stdout(msgs []wsMsg) string {
	var b strings.Builder
	for _, m := range msgs {
		var c struct{ Name, Text string }
		if m.Header.MsgType == "stream" && json.Unmarshal(m.Content, &c) == nil && c.Name == "stdout" {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// ready sends kernel_info_request (a fresh one each second, as clients
// nudge a kernel) until one is answered. Through jupyter_server's gateway
// proxy this is required: it loses what a client sends before its own
// connection to the gateway is up. (A read that times out would close the
// connection, so the nudges come from a goroutine.)
func (w *wsClient) ready() {
	w.t.Helper()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for i := 0; ; i++ {
			frame := fmt.Sprintf(`{"channel":"shell","header":{"msg_id":"nudge-%s-%d","msg_type":"kernel_info_request","session":%q,"username":"t","version":"5.3"},"parent_header":{},"metadata":{},"content":{}}`,
				w.sess, i, w.sess)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := w.c.Write(ctx, websocket.MessageText, []byte(frame))
			cancel()
			if err != nil {
				return
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	for {
		m, err := w.read(60 * time.Second)
		if err != nil {
			w.t.Fatalf("waiting for kernel_info_reply: %v", err)
		}
		if m.Header.MsgType == "kernel_info_reply" && strings.HasPrefix(m.ParentHeader.MsgID, "nudge-"+w.sess) {
			return
		}
	}
}
