package jupyter

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/cubicle-sandbox/cubicle/internal/bench"
	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/config"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/linux"
	"github.com/cubicle-sandbox/cubicle/internal/template/templatetest"
	"github.com/cubicle-sandbox/cubicle/internal/testbin"
)

// agentBin is the real cubicle binary: the end-to-end tests' computers run
// it as their agent.
var agentBin string

func TestMain(m *testing.M) { os.Exit(testbin.Main(m, &agentBin)) }

// realEnv is the gateway over real computers: SQLite, the linux driver,
// real kernels, real HTTP.
type realEnv struct {
	url string
	key string
	mgr *computer.Manager
	gov *governance.Service
}

func newRealEnv(t *testing.T, cfg Config) *realEnv { return newRealEnvWith(t, cfg, nil) }

// newRealEnvWith is newRealEnv with the computers' configuration adjusted
// by tweak.
func newRealEnvWith(t *testing.T, cfg Config, tweak func(*computer.Config)) *realEnv {
	t.Helper()
	dir := t.TempDir()
	drv, err := linux.New(linux.Config{StateDir: dir, AgentPath: agentBin})
	if err != nil {
		t.Fatal(err)
	}
	key := "cub_kgw_e2e_key_0000001"
	lim := computer.Config{Memory: 512 << 20, Pids: 256, CPUs: 1, Disk: 64 << 20, Lifetime: 600 * time.Second,
		ExecTimeout: 30 * time.Second, MaxConcurrent: 8, MemoryBudget: 8 << 30, MaxFileBytes: 1 << 20, MaxOutputBytes: 1 << 20}
	if tweak != nil {
		tweak(&lim)
	}
	g := serveGateway(t, cfg, dir, key, drv, lim)
	return &realEnv{url: g.url, key: key, mgr: g.mgr, gov: g.gov}
}

func (e *realEnv) computerOf(t *testing.T, kernelID string) computer.View {
	t.Helper()
	p, err := e.gov.Authenticate(t.Context(), e.key)
	if err != nil {
		t.Fatal(err)
	}
	all, err := e.mgr.List(t.Context(), p, true, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range all {
		if v.Metadata[KernelMetadataKey] == kernelID {
			return v
		}
	}
	t.Fatalf("no computer has kernel %s", kernelID)
	return computer.View{}
}

// startJupyter starts Debian's jupyter_server with cfg (in a temporary
// directory) and stops it at the test's end, showing its log if the test
// failed.
func startJupyter(t *testing.T, ctx context.Context, cfg bench.JupyterConfig) *bench.Jupyter {
	t.Helper()
	cfg.Dir = t.TempDir()
	j, err := bench.StartJupyter(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("jupyter_server's log ends with:\n%s", j.LogTail(6000))
		}
		if err := j.Stop(); err != nil {
			t.Error(err)
		}
	})
	return j
}

// TestJupyterServerThroughCubicle: Debian's jupyter_server, started with
// --gateway-url and the key as its gateway token, runs a kernel in a
// computer: start, execute over its own WebSocket, interrupt, restart, shut
// down.
func TestJupyterServerThroughCubicle(t *testing.T) {
	e := newRealEnv(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	j := startJupyter(t, ctx, bench.JupyterConfig{Args: []string{"--gateway-url=" + e.url, "--GatewayClient.auth_token=" + e.key}})
	jauth := "token " + j.Token
	if r := doReq(t, j.URL, jauth, "GET", "/api/kernelspecs", nil); r.code != 200 || !strings.Contains(string(r.body), "Python 3 (Cubicle)") {
		t.Fatalf("jupyter_server's kernelspecs: %s", r)
	}
	kid, err := j.StartKernel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r := doReq(t, e.url, "token "+e.key, "GET", "/api/kernels/"+kid, nil); r.code != 200 {
		t.Fatalf("the kernel is not Cubicle's: %s", r)
	}
	cmp := e.computerOf(t, kid)
	ws := dialChannels(t, j.URL, j.Token, kid)
	ws.ready()

	reply, seen := ws.execute("x = 20\nprint(x + 1)\nx * 2", false)
	if reply.status() != "ok" || stdout(seen) != "21\n" || !hasResult(seen, "40") {
		t.Fatalf("execute: %s, outputs %s", reply.status(), dump(seen))
	}

	// Interrupt once the cell runs (its first output says so).
	id := ws.sendExecute("import time\nprint('sleeping', flush=True)\ntime.sleep(60)", false)
	ws.until("stream", id)
	if r := doReq(t, j.URL, jauth, "POST", "/api/kernels/"+kid+"/interrupt", map[string]any{}); r.code != http.StatusNoContent {
		t.Fatalf("interrupt: %s", r)
	}
	reply, seen = ws.finish(id)
	if reply.status() != "error" || !hasError(seen, "KeyboardInterrupt") {
		t.Fatalf("interrupted cell: %s, %s", reply.status(), dump(seen))
	}

	if r := doReq(t, j.URL, jauth, "POST", "/api/kernels/"+kid+"/restart", map[string]any{}); r.code != http.StatusOK {
		t.Fatalf("restart: %s", r)
	}
	reply, seen = ws.execute("'x' in globals()", false)
	if reply.status() != "ok" || !hasResult(seen, "False") {
		t.Fatalf("after restart: %s, %s", reply.status(), dump(seen))
	}
	if cmp2 := e.computerOf(t, kid); cmp2.ID != cmp.ID {
		t.Fatalf("restart moved the kernel to computer %s", cmp2.ID)
	}

	if r := doReq(t, j.URL, jauth, "DELETE", "/api/kernels/"+kid, nil); r.code != http.StatusNoContent {
		t.Fatalf("shut down: %s", r)
	}
	if r := doReq(t, e.url, "token "+e.key, "GET", "/api/kernels/"+kid, nil); r.code != http.StatusNotFound {
		t.Fatalf("after shut-down Cubicle has %s", r)
	}
	if v := e.computerOf(t, kid); v.Status != "destroyed" {
		t.Fatalf("the kernel's computer is %s", v.Status)
	}
}

// TestRawKernel: a jupyter_client-style flow over the raw API: streamed
// output, input() over stdin, an error, rich display (image/png and a
// custom MIME type), and the environment allowlist.
func TestRawKernel(t *testing.T) {
	e := newRealEnv(t, Config{})
	k := startKernel(t, e.url, e.key, map[string]string{"OPENAI_API_KEY": "sk-must-not-leak", "LANG": "C.UTF-8",
		"KERNEL_FLAVOUR": "raw", "MY_TOKEN": "t"})
	ws := dialChannels(t, e.url, e.key, k.ID)

	reply, seen := ws.execute("import time\nfor i in range(3):\n    print('tick', i, flush=True)\n    time.sleep(0.3)", false)
	streams := 0
	for _, m := range seen {
		if m.Header.MsgType == "stream" {
			streams++
		}
	}
	if reply.status() != "ok" || streams < 2 || stdout(seen) != "tick 0\ntick 1\ntick 2\n" {
		t.Fatalf("streamed output: %s, %d stream messages, %s", reply.status(), streams, dump(seen))
	}

	id := ws.sendExecute("name = input('who? ')\nprint('hello', name)", true)
	req, _ := ws.until("input_request", id)
	if req.Channel != "stdin" || !strings.Contains(string(req.Content), "who? ") {
		t.Fatalf("input_request %+v %s", req, req.Content)
	}
	ws.send("stdin", "input_reply", map[string]any{"value": "ann"}, req.Header.MsgID)
	reply, seen = ws.finish(id)
	if reply.status() != "ok" || stdout(seen) != "hello ann\n" {
		t.Fatalf("input(): %s, %s", reply.status(), dump(seen))
	}

	reply, seen = ws.execute("1/0", false)
	if reply.status() != "error" || !hasError(seen, "ZeroDivisionError") {
		t.Fatalf("error: %s, %s", reply.status(), dump(seen))
	}

	img := image.NewRGBA(image.Rect(0, 0, 2, 2))
	img.Set(0, 0, color.RGBA{255, 0, 0, 255})
	var pngBuf bytes.Buffer
	png.Encode(&pngBuf, img)
	b64 := base64.StdEncoding.EncodeToString(pngBuf.Bytes())
	reply, seen = ws.execute(fmt.Sprintf("from IPython.display import display, Image\nimport base64\n"+
		"display(Image(data=base64.b64decode(%q)))\ndisplay({'application/x-cubicle-test+json': {'n': 1}, 'text/plain': 'custom'}, raw=True)", b64), false)
	var gotPNG, gotCustom bool
	for _, m := range seen {
		var c struct {
			Data map[string]json.RawMessage `json:"data"`
		}
		if m.Header.MsgType != "display_data" || json.Unmarshal(m.Content, &c) != nil {
			continue
		}
		if raw, ok := c.Data["image/png"]; ok {
			var s string
			json.Unmarshal(raw, &s)
			b, _ := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
			_, err := png.Decode(bytes.NewReader(b))
			gotPNG = err == nil && bytes.Equal(b, pngBuf.Bytes())
		}
		if raw, ok := c.Data["application/x-cubicle-test+json"]; ok {
			gotCustom = string(raw) == `{"n":1}` || string(raw) == `{"n": 1}`
		}
	}
	if reply.status() != "ok" || !gotPNG || !gotCustom {
		t.Fatalf("rich display: %s png %v custom %v: %s", reply.status(), gotPNG, gotCustom, dump(seen))
	}

	reply, seen = ws.execute("import os\nprint(os.environ.get('OPENAI_API_KEY'), os.environ.get('MY_TOKEN'), os.environ.get('LANG'), os.environ.get('KERNEL_FLAVOUR'), os.getcwd())", false)
	if got := stdout(seen); reply.status() != "ok" || got != "None None C.UTF-8 raw /workspace\n" {
		t.Fatalf("environment: %q", got)
	}

	// A crash: the client sees the standard "restarting", then a fresh kernel.
	ws.sendExecute("import os\nos._exit(1)", false)
	for {
		m, err := ws.read(60 * time.Second)
		if err != nil {
			t.Fatalf("waiting for status restarting: %v", err)
		}
		if m.Channel == "iopub" && m.Header.MsgType == "status" && strings.Contains(string(m.Content), `"restarting"`) {
			break
		}
	}
	reply, seen = ws.execute("'name' in globals(), 6*7", false)
	if reply.status() != "ok" || !hasResult(seen, "(False, 42)") {
		t.Fatalf("after the crash: %s", dump(seen))
	}
}

// TestSeedAgentStartup: the seed agent's sequence against a kernel whose
// working directory (PWD, under an allowed root) is mounted at its own
// path: chdir, an init cell that sets env and sys.path, a prelude that
// displays a custom MIME bundle raw, and print(json.dumps(...)).
func TestSeedAgentStartup(t *testing.T) {
	base, err := os.MkdirTemp("/var/tmp", "kgw-seed") // not /tmp: the computer has its own
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	project := filepath.Join(base, "project")
	os.MkdirAll(project, 0o755)
	os.WriteFile(filepath.Join(project, "data.txt"), []byte("from the host"), 0o644)
	os.WriteFile(filepath.Join(project, "helper.py"), []byte("VALUE = 42\n"), 0o644)
	// The kernel runs as uid 1000: the project must be its to write.
	for _, p := range []string{project, filepath.Join(project, "data.txt"), filepath.Join(project, "helper.py")} {
		if err := os.Chown(p, 1000, 1000); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(base, 0o755)
	e := newRealEnv(t, Config{MountRoots: config.MountRoots{{Path: base}}})
	k := startKernel(t, e.url, e.key, map[string]string{"PWD": project, "HOME": "/home/dev", "LANG": "C.UTF-8",
		"ANTHROPIC_API_KEY": "sk-ant-must-not-leak"})
	ws := dialChannels(t, e.url, e.key, k.ID)

	init := fmt.Sprintf("import os, sys\n__cwd = %q\nos.chdir(__cwd)\nos.environ.update({'PI_SESSION': 's1'})\n"+
		"if __cwd not in sys.path:\n    sys.path.insert(0, __cwd)\n", project)
	if reply, seen := ws.execute(init, false); reply.status() != "ok" {
		t.Fatalf("init cell: %s", dump(seen))
	}
	prelude := "from IPython.display import display\ndisplay({'application/x-xcsh-status': {'op': 'prelude', 'ok': True}}, raw=True)"
	reply, seen := ws.execute(prelude, false)
	var status map[string]any
	for _, m := range seen {
		var c struct {
			Data map[string]map[string]any `json:"data"`
		}
		if m.Header.MsgType == "display_data" && json.Unmarshal(m.Content, &c) == nil {
			status = c.Data["application/x-xcsh-status"]
		}
	}
	if reply.status() != "ok" || status["op"] != "prelude" || status["ok"] != true {
		t.Fatalf("prelude: %s", dump(seen))
	}
	reply, seen = ws.execute("import json, helper\nopen('out.txt', 'w').write('from the kernel')\n"+
		"print(json.dumps({'cwd': os.getcwd(), 'data': open('data.txt').read(), 'helper': helper.VALUE, "+
		"'session': os.environ.get('PI_SESSION'), 'leak': os.environ.get('ANTHROPIC_API_KEY')}))", false)
	var out struct {
		Cwd, Data, Session string
		Helper             int
		Leak               *string
	}
	if err := json.Unmarshal([]byte(stdout(seen)), &out); err != nil || reply.status() != "ok" {
		t.Fatalf("json.dumps: %v: %s", err, dump(seen))
	}
	if out.Cwd != project || out.Data != "from the host" || out.Helper != 42 || out.Session != "s1" || out.Leak != nil {
		t.Fatalf("the kernel saw %+v", out)
	}
	if b, err := os.ReadFile(filepath.Join(project, "out.txt")); err != nil || string(b) != "from the kernel" {
		t.Fatalf("the host sees %q, %v", b, err)
	}
}

// TestRealAuth: a wrong key is 401 and another organisation's kernel is
// 404, on REST and on the WebSocket.
func TestRealAuth(t *testing.T) {
	e := newRealEnv(t, Config{})
	k := startKernel(t, e.url, e.key, nil)
	if r := doReq(t, e.url, "token wrong", "GET", "/api/kernels/"+k.ID, nil); r.code != http.StatusUnauthorized {
		t.Fatalf("wrong key: %s", r)
	}
	org, _ := e.gov.CreateOrg(t.Context(), "other", governance.OrgSettings{})
	_, other, _ := e.gov.CreateKey(t.Context(), org.ID, "k", governance.AllCapabilities())
	if r := doReq(t, e.url, "token "+other, "GET", "/api/kernels/"+k.ID, nil); r.code != http.StatusNotFound {
		t.Fatalf("another org: %s", r)
	}
	if r := doReq(t, e.url, "token "+other, "DELETE", "/api/kernels/"+k.ID, nil); r.code != http.StatusNotFound {
		t.Fatalf("another org deletes: %s", r)
	}
	if r := doReq(t, e.url, "token "+e.key, "GET", "/api/kernels/"+k.ID, nil); r.code != http.StatusOK {
		t.Fatalf("the kernel after another org's attempts: %s", r)
	}
}

// TestV1Subprotocol: a client offering v1.kernel.websocket.jupyter.org
// (jupyter_server 2.x and JupyterLab do) gets it, and an execute_request
// and everything that answers it travel as v1 binary frames over the real
// socket, to and from a real kernel; a client offering nothing gets the
// legacy frames.
func TestV1Subprotocol(t *testing.T) {
	e := newRealEnv(t, Config{})
	k := startKernel(t, e.url, e.key, nil)
	ws := dialChannels(t, e.url, e.key, k.ID, "v0.kernel.websocket.jupyter.org", SubprotocolV1)
	if got := ws.c.Subprotocol(); got != SubprotocolV1 || !ws.v1 {
		t.Fatalf("selected subprotocol %q, want %q", got, SubprotocolV1)
	}
	reply, seen := ws.execute("print('hi')\n6 * 7", false)
	if reply.Channel != "shell" || reply.status() != "ok" || stdout(seen) != "hi\n" || !hasResult(seen, "42") {
		t.Fatalf("execute over v1: %s %s, messages %s", reply.Channel, reply.Content, dump(seen))
	}
	for _, m := range append(seen, reply) {
		if !m.binary {
			t.Fatalf("a message not in a v1 frame: %+v", m)
		}
	}
	if legacy := dialChannels(t, e.url, e.key, k.ID); legacy.c.Subprotocol() != "" || legacy.v1 {
		t.Fatalf("a client offering no subprotocol got %q", legacy.c.Subprotocol())
	}
}

// TestOversizeHeaderRefused: a client message whose header the kernel
// could not echo within the kernel wire's bound never reaches the kernel.
// The header is 60 KB of 1e15s: under the wire's 64 KiB as sent, but
// Python writes each out as 1000000000000000.0, so the kernel's echo would
// be 240 KB and the kernel would be stopped for it. A request gets an
// error reply saying why; any other message closes the connection with the
// reason; the kernel still runs code.
func TestOversizeHeaderRefused(t *testing.T) {
	e := newRealEnv(t, Config{})
	k := startKernel(t, e.url, e.key, nil)
	ws := dialChannels(t, e.url, e.key, k.ID)
	reply, _ := ws.execute("x = 6", false)
	if reply.status() != "ok" {
		t.Fatalf("first cell: %s", reply.Content)
	}

	pad := strings.TrimSuffix(strings.Repeat("1e15,", 12000), ",")
	big := func(id, msgType, channel string) []byte {
		return fmt.Appendf(nil, `{"channel":%q,"header":{"msg_id":%q,"msg_type":%q,"session":"s","username":"t","version":"5.3","pad":[%s]},`+
			`"parent_header":{},"metadata":{},"content":{"code":"x = 0","silent":false,"store_history":true,"user_expressions":{},"allow_stdin":false,"stop_on_error":false}}`,
			channel, id, msgType, pad)
	}
	ws.write(websocket.MessageText, big("big-1", "execute_request", "shell"))
	reply, seen := ws.finish("big-1")
	var c struct{ Status, EName, EValue string }
	json.Unmarshal(reply.Content, &c)
	if c.Status != "error" || c.EName != "MessageRefused" || !strings.Contains(c.EValue, "at most 8192") || !hasError(seen, "MessageRefused") {
		t.Fatalf("execute_reply %s, messages %s", reply.Content, dump(seen))
	}

	ws.write(websocket.MessageText, big("big-2", "comm_msg", "shell"))
	for {
		_, err := ws.read(10 * time.Second)
		var ce websocket.CloseError
		if errors.As(err, &ce) {
			if ce.Code != websocket.StatusPolicyViolation || !strings.Contains(ce.Reason, "header") {
				t.Fatalf("closed with %v", ce)
			}
			break
		}
		if err != nil {
			t.Fatalf("waiting for the close: %v", err)
		}
	}

	ws = dialChannels(t, e.url, e.key, k.ID)
	reply, seen = ws.execute("x * 7", false)
	if reply.status() != "ok" || !hasResult(seen, "42") {
		t.Fatalf("after the refused messages: %s, %s", reply.status(), dump(seen))
	}
	var m model
	json.Unmarshal(doReq(t, e.url, "token "+e.key, "GET", "/api/kernels/"+k.ID, nil).body, &m)
	if m.ExecutionState == "dead" {
		t.Fatalf("the kernel is dead: %+v", m)
	}
}

func hasResult(msgs []wsMsg, text string) bool {
	for _, m := range msgs {
		var c struct {
			Data map[string]string `json:"data"`
		}
		if m.Header.MsgType == "execute_result" && json.Unmarshal(m.Content, &c) == nil && c.Data["text/plain"] == text {
			return true
		}
	}
	return false
}

func hasError(msgs []wsMsg, ename string) bool {
	for _, m := range msgs {
		var c struct{ Ename string }
		if m.Header.MsgType == "error" && json.Unmarshal(m.Content, &c) == nil && c.Ename == ename {
			return true
		}
	}
	return false
}

// dump shows messages in a failure, bounded.
func dump(msgs []wsMsg) string {
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "\n  %s %s %.300s", m.Channel, m.Header.MsgType, m.Content)
	}
	return b.String()
}

// TestReadOnlyMount: a working directory under a read-only root is
// readable and not writable; one outside every root is not mounted.
func TestReadOnlyMount(t *testing.T) {
	base, err := os.MkdirTemp("/var/tmp", "kgw-ro")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	ref := filepath.Join(base, "ref")
	os.MkdirAll(ref, 0o777)
	os.WriteFile(filepath.Join(ref, "table.csv"), []byte("a,b\n1,2\n"), 0o644)
	os.Chown(ref, 1000, 1000)
	e := newRealEnv(t, Config{MountRoots: config.MountRoots{{Path: base, ReadOnly: true}}})
	k := startKernel(t, e.url, e.key, map[string]string{"KERNEL_WORKING_DIR": ref})
	ws := dialChannels(t, e.url, e.key, k.ID)
	reply, seen := ws.execute("import os\nprint(os.getcwd(), open('table.csv').read().splitlines()[1])\n"+
		"try:\n    open('new.txt', 'w')\nexcept OSError as e:\n    print(type(e).__name__, e.errno)", false)
	if got := stdout(seen); reply.status() != "ok" || got != ref+" 1,2\nOSError 30\n" {
		t.Fatalf("read-only mount: %q %s", got, dump(seen))
	}
	if _, err := os.Stat(filepath.Join(ref, "new.txt")); !os.IsNotExist(err) {
		t.Fatalf("the kernel wrote through a read-only mount: %v", err)
	}
	other := startKernel(t, e.url, e.key, map[string]string{"KERNEL_WORKING_DIR": "/var/tmp"})
	ws2 := dialChannels(t, e.url, e.key, other.ID)
	reply, seen = ws2.execute("import os\nprint(os.getcwd(), os.path.exists('/var/tmp'))", false)
	if got := stdout(seen); reply.status() != "ok" || got != "/workspace False\n" {
		t.Fatalf("outside the roots: %q", got)
	}
}

// TestNbclientThroughJupyterServer: nbclient runs a notebook (print,
// DataFrame, plot, error, arithmetic) with jupyter_server 1.23's own
// GatewayKernelManager, unpatched, against Debian's jupyter_server started
// with --gateway-url: its GatewayKernelClient sends messages without a
// channel and with a numeric header date, which reach Cubicle through
// jupyter_server's proxy.
func TestNbclientThroughJupyterServer(t *testing.T) {
	e := newRealEnv(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// GatewayKernelClient's WebSocket carries no credentials, so this
	// jupyter_server (loopback only) takes none.
	j := startJupyter(t, ctx, bench.JupyterConfig{NoToken: true,
		Args: []string{"--gateway-url=" + e.url, "--GatewayClient.auth_token=" + e.key, "--ServerApp.disable_check_xsrf=True"}})
	cmd := exec.CommandContext(ctx, "/usr/bin/python3", "testdata/nbclient_run.py", j.URL, "unused")
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("nbclient: %v\n%s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	var cells [][]map[string]any
	if err := json.Unmarshal(out, &cells); err != nil || len(cells) != 5 {
		t.Fatalf("nbclient printed %s (%v)", out, err)
	}
	data := func(c []map[string]any, mime string) string {
		for _, o := range c {
			if d, ok := o["data"].(map[string]any); ok {
				if s, ok := d[mime].(string); ok {
					return s
				}
			}
		}
		return ""
	}
	if len(cells[0]) != 1 || cells[0][0]["text"] != "hello from cubicle\n" {
		t.Errorf("print: %v", cells[0])
	}
	if !strings.Contains(data(cells[1], "text/html"), "<table") {
		t.Errorf("DataFrame: %v", cells[1])
	}
	if !strings.HasPrefix(data(cells[2], "image/png"), "iVBOR") {
		t.Errorf("plot: %.200v", cells[2])
	}
	if len(cells[3]) != 1 || cells[3][0]["ename"] != "ZeroDivisionError" {
		t.Errorf("error: %v", cells[3])
	}
	if data(cells[4], "text/plain") != "42" {
		t.Errorf("arithmetic: %v", cells[4])
	}
}

// TestKernelSpecPerTemplate: every template with Python has a kernel spec
// of its own (python3-<template>), whose kernels run in a computer made
// from that template, with the template's Python.
func TestKernelSpecPerTemplate(t *testing.T) {
	name := templatetest.DebianKernelName
	e := newRealEnvWith(t, Config{}, func(c *computer.Config) { c.Templates = templatetest.DebianKernel(t) })
	var all struct {
		Default     string `json:"default"`
		Kernelspecs map[string]struct {
			Spec struct {
				Argv        []string `json:"argv"`
				DisplayName string   `json:"display_name"`
			} `json:"spec"`
		} `json:"kernelspecs"`
	}
	r := doReq(t, e.url, "token "+e.key, "GET", "/api/kernelspecs", nil)
	// The store is shared with other tests' templates: only these two
	// specs are this test's.
	if err := json.Unmarshal(r.body, &all); err != nil || all.Default != "python3" || len(all.Kernelspecs) < 2 ||
		all.Kernelspecs["python3-"+name].Spec.DisplayName != "Python 3 (Cubicle, "+name+")" ||
		all.Kernelspecs["python3-"+name].Spec.Argv[0] != "/usr/bin/python3" {
		t.Fatalf("kernelspecs: %s", r)
	}
	r = doReq(t, e.url, "token "+e.key, "POST", "/api/kernels", map[string]any{"name": "python3-" + name})
	var m model
	if err := json.Unmarshal(r.body, &m); err != nil || r.code != http.StatusCreated || m.Name != "python3-"+name {
		t.Fatalf("start: %s", r)
	}
	if v := e.computerOf(t, m.ID); v.Template != name {
		t.Fatalf("the kernel's computer is made from %q", v.Template)
	}
	ws := dialChannels(t, e.url, e.key, m.ID)
	// The host's runtime has numpy; the template has none.
	reply, seen := ws.execute("import importlib.util; print(importlib.util.find_spec('numpy') is None)", false)
	if reply.status() != "ok" || stdout(seen) != "True\n" {
		t.Fatalf("in the template's kernel: %s %q", reply.status(), stdout(seen))
	}
	r = doReq(t, e.url, "token "+e.key, "POST", "/api/kernels", map[string]any{"name": "python3-nope"})
	if r.code != http.StatusNotFound || !strings.Contains(string(r.body), "python3-"+name) {
		t.Fatalf("an unknown spec: %s", r)
	}
}
