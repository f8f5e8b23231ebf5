package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
)

// ptyConn is a test's WebSocket on GET …/pty: it collects the terminal's
// output and the exit message.
type ptyConn struct {
	t     *testing.T
	c     *websocket.Conn
	mu    sync.Mutex
	out   []byte
	seen  int            // output before it was matched by expect
	hello map[string]any // the first message: {"type":"terminal","id":…}
	exit  map[string]any
	err   error         // why the connection ended
	done  chan struct{} // closed when the connection ended
}

// dialPTY opens a terminal as key; query is added to the URL.
func (e *env) dialPTY(key, id, query string) (*ptyConn, *http.Response, error) {
	u := strings.Replace(e.url, "http://", "ws://", 1) + "/v1/computers/" + id + "/pty?" + query
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, res, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + key}}})
	if err != nil {
		return nil, res, err
	}
	p := &ptyConn{t: e.t, c: c, done: make(chan struct{})}
	go p.read()
	e.t.Cleanup(func() { c.CloseNow() })
	return p, res, nil
}

func (e *env) openPTY(key, id, query string) *ptyConn {
	e.t.Helper()
	p, res, err := e.dialPTY(key, id, query)
	if err != nil {
		code := 0
		if res != nil {
			code = res.StatusCode
		}
		e.t.Fatalf("dial pty: %v (HTTP %d)", err, code)
	}
	return p
}

func (p *ptyConn) read() {
	defer close(p.done)
	for {
		typ, b, err := p.c.Read(context.Background())
		if err != nil {
			p.mu.Lock()
			p.err = err
			p.mu.Unlock()
			return
		}
		p.mu.Lock()
		if typ == websocket.MessageBinary {
			p.out = append(p.out, b...)
		} else {
			var m map[string]any
			json.Unmarshal(b, &m)
			if m["type"] == "terminal" {
				p.hello = m
			} else {
				p.exit = m
			}
		}
		p.mu.Unlock()
	}
}

func (p *ptyConn) send(s string) {
	p.t.Helper()
	if err := p.c.Write(context.Background(), websocket.MessageBinary, []byte(s)); err != nil {
		p.t.Fatalf("send %q: %v", s, err)
	}
}

func (p *ptyConn) resize(cols, rows int) {
	p.t.Helper()
	b, _ := json.Marshal(map[string]any{"type": "resize", "cols": cols, "rows": rows})
	if err := p.c.Write(context.Background(), websocket.MessageText, b); err != nil {
		p.t.Fatal(err)
	}
}

// expect waits for output matching re after what earlier expects matched,
// and returns the match.
func (p *ptyConn) expect(re string) string {
	p.t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(15 * time.Second)
	for {
		p.mu.Lock()
		rest := p.out[p.seen:]
		if loc := rx.FindIndex(rest); loc != nil {
			m := string(rest[loc[0]:loc[1]])
			p.seen += loc[1]
			p.mu.Unlock()
			return m
		}
		all := string(p.out)
		p.mu.Unlock()
		if time.Now().After(deadline) {
			p.t.Fatalf("no output matching %q; the terminal showed:\n%q", re, all)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// exitMessage waits for the connection's end and returns its exit message.
func (p *ptyConn) exitMessage() map[string]any {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		p.t.Fatal("the terminal did not end")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exit
}

// sleepStates is the state letter (S, T, …) of every sleep process in the
// computer.
func (e *env) sleepStates(id string) string {
	return strings.TrimSpace(e.sh(e.admin, id, `for d in /proc/[0-9]*; do [ "$(cat $d/comm 2>/dev/null)" = sleep ] && cut -d' ' -f3 $d/stat; done; true`))
}

const ptyPrompt = `\$ $`

// A login shell on a terminal: its prompt, tty, stty size after a resize,
// Ctrl-C, Ctrl-Z and fg (job control), and exit 3 in the exit message.
func TestPTYShell(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.create(e.admin, nil).ID
	p := e.openPTY(e.admin, id, "cols=100&rows=30")
	p.expect(`\$ `)

	p.send("tty\r")
	p.expect(`/dev/pts/\d+`)
	p.send("stty size\r")
	p.expect(`30 100`)
	p.resize(132, 43)
	p.send("stty size; echo $TERM $PWD\r")
	p.expect(`43 132\s+xterm-256color /workspace`)

	// Ctrl-C stops a foreground sleep: the next command runs at once
	// (it would wait 100 s behind the sleep otherwise).
	p.send("sleep 100\r")
	eventually(t, 10*time.Second, "sleep running", func() bool { return e.sleepStates(id) == "S" })
	p.send("\x03")
	p.send("echo after-int-$((6*7))\r")
	p.expect(`after-int-42`)
	if s := e.sleepStates(id); s != "" {
		t.Fatalf("sleep after Ctrl-C: %q", s)
	}

	// Ctrl-Z stops it (state T), fg resumes it (S), Ctrl-C ends it.
	p.send("sleep 100\r")
	eventually(t, 10*time.Second, "sleep running", func() bool { return e.sleepStates(id) == "S" })
	p.send("\x1a")
	p.expect(`Stopped\s+sleep 100`)
	eventually(t, 10*time.Second, "sleep stopped", func() bool { return e.sleepStates(id) == "T" })
	p.send("fg\r")
	eventually(t, 10*time.Second, "sleep resumed", func() bool { return e.sleepStates(id) == "S" })
	p.send("\x03")
	p.send("echo after-fg-$((6*7))\r")
	p.expect(`after-fg-42`)

	p.send("exit 3\r")
	m := p.exitMessage()
	if m["type"] != "exit" || m["exit_code"] != float64(3) || m["signal"] != float64(0) {
		t.Fatalf("exit message: %v", m)
	}
}

// Closing the WebSocket hangs the terminal up: its processes end.
// Another organisation's key gets 404; a ninth terminal is refused with
// 429 until one of the eight closes.
func TestPTYLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.create(e.admin, nil).ID
	_, other := e.newKey(e.newOrg("b", true), computerCaps)
	if _, res, err := e.dialPTY(other, id, ""); err == nil || res == nil || res.StatusCode != http.StatusNotFound {
		t.Fatalf("another organisation's key: %v %v", err, res)
	}
	if _, res, err := e.dialPTY("", id, ""); err == nil || res == nil || res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no key: %v %v", err, res)
	}
	// The key as ?token= (a browser's WebSocket cannot set headers).
	u := strings.Replace(e.url, "http://", "ws://", 1) + "/v1/computers/" + id + "/pty?argv=true&token=" + url.QueryEscape(e.admin)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, u, nil)
	if err != nil {
		t.Fatalf("dial with ?token=: %v", err)
	}
	c.CloseNow()
	eventually(t, 10*time.Second, "the terminal of true ended", func() bool { return len(e.terminals(id)) == 0 })

	var ptys []*ptyConn
	for i := 0; i < 8; i++ {
		p := e.openPTY(e.admin, id, "argv=sleep&argv=1000")
		ptys = append(ptys, p)
	}
	eventually(t, 10*time.Second, "eight sleeps", func() bool { return e.sleepStates(id) == strings.TrimSpace(strings.Repeat("S\n", 8)) })
	_, res, err := e.dialPTY(e.admin, id, "")
	if err == nil || res == nil || res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a ninth terminal: %v %v", err, res)
	}
	for _, p := range ptys[:4] {
		p.c.Close(websocket.StatusNormalClosure, "")
	}
	eventually(t, 10*time.Second, "four sleeps hung up", func() bool { return e.sleepStates(id) == strings.TrimSpace(strings.Repeat("S\n", 4)) })
	p := e.openPTY(e.admin, id, "command=echo+ok-$((40%2B2))")
	p.expect(`ok-42`)
	if m := p.exitMessage(); m["exit_code"] != float64(0) {
		t.Fatalf("exit message: %v", m)
	}
}

// terminalView is a terminal of GET …/terminals.
type terminalView struct {
	ID         string `json:"id"`
	Object     string `json:"object"`
	Pid        int    `json:"pid"`
	Status     string `json:"status"`
	Attached   bool   `json:"attached"`
	ExitCode   *int   `json:"exit_code"`
	Cols       int    `json:"cols"`
	Rows       int    `json:"rows"`
	DetachedAt *int64 `json:"detached_at"`
}

func (e *env) terminals(id string) map[string]terminalView {
	e.t.Helper()
	r := e.do(e.admin, "GET", "/v1/computers/"+id+"/terminals", nil)
	if r.code != http.StatusOK {
		e.t.Fatalf("GET terminals: %s", r)
	}
	var page struct {
		Data []terminalView `json:"data"`
	}
	r.json(e.t, &page)
	out := map[string]terminalView{}
	for _, v := range page.Data {
		out[v.ID] = v
	}
	return out
}

func (p *ptyConn) terminalID() string {
	p.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		p.mu.Lock()
		id, _ := p.hello["id"].(string)
		p.mu.Unlock()
		if id != "" {
			return id
		}
		if time.Now().After(deadline) {
			p.t.Fatal("no terminal message")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A terminal outlives a lost connection for the grace period: listed as
// detached, it runs on, and a client that attaches by its id gets the
// scrollback (what it printed meanwhile too), then its output; another
// client takes it over (the first is closed with 4001); a close with 1000
// hangs it up. Not attached within the grace period, it is hung up; once
// ended it can still be attached for its exit, then it is forgotten.
func TestPTYReattach(t *testing.T) {
	t.Parallel()
	const grace = 6 * time.Second
	e := newEnv(t, func(c *computer.Config) { c.TerminalGrace = grace })
	id := e.create(e.admin, nil).ID
	p := e.openPTY(e.admin, id, "cols=100&rows=30")
	tid := p.terminalID()
	if !strings.HasPrefix(tid, "term_") || p.hello["cols"] != float64(100) || p.hello["rows"] != float64(30) {
		t.Fatalf("hello: %v", p.hello)
	}
	p.expect(`\$ `)
	p.send("echo before-$((6*7))\r")
	p.expect(`before-42`)
	p.send("for i in 1 2 3; do echo tick-$i; sleep 0.5; done; echo done-$((6*7))\r")
	p.expect(`tick-1`)
	p.c.CloseNow() // lost: no close frame

	eventually(t, 10*time.Second, "the terminal detached", func() bool {
		v := e.terminals(id)[tid]
		return v.Status == "running" && !v.Attached && v.DetachedAt != nil && v.Object == "terminal" && v.Pid > 1
	})
	time.Sleep(2 * time.Second) // the loop ends while nobody is attached
	p2 := e.openPTY(e.admin, id, "attach="+tid)
	if p2.terminalID() != tid {
		t.Fatalf("attached to %v", p2.hello)
	}
	p2.expect(`before-42`) // the scrollback
	p2.expect(`tick-3`)
	p2.expect(`done-42`)
	if v := e.terminals(id)[tid]; !v.Attached || v.DetachedAt != nil {
		t.Fatalf("attached: %+v", v)
	}
	p2.send("echo live-$((6*7))\r")
	p2.expect(`live-42`)

	// A third client takes it over.
	p3 := e.openPTY(e.admin, id, "attach="+tid)
	p3.expect(`live-42`)
	select {
	case <-p2.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the client taken over was not closed")
	}
	if websocket.CloseStatus(p2.err) != 4001 {
		t.Fatalf("the client taken over: %v", p2.err)
	}
	p3.send("echo three-$((6*7))\r")
	p3.expect(`three-42`)
	p3.c.Close(websocket.StatusNormalClosure, "") // hangs up
	eventually(t, 10*time.Second, "hung up by a normal close", func() bool { return e.terminals(id)[tid].Status == "exited" })

	// Not attached again within the grace period: hung up.
	q := e.openPTY(e.admin, id, "argv=sleep&argv=1000")
	qid := q.terminalID()
	eventually(t, 10*time.Second, "sleep running", func() bool { return e.sleepStates(id) == "S" })
	q.c.CloseNow()
	time.Sleep(grace / 2)
	if e.sleepStates(id) != "S" {
		t.Fatal("the terminal was hung up before its grace period ended")
	}
	eventually(t, 3*grace, "hung up after the grace period", func() bool { return e.sleepStates(id) == "" })
	// Ended: attaching gives its exit at once, until it is forgotten.
	q2 := e.openPTY(e.admin, id, "attach="+qid)
	if m := q2.exitMessage(); m["type"] != "exit" || m["signal"] == float64(0) {
		t.Fatalf("the exit of a hung-up terminal: %v", m)
	}
	eventually(t, 3*grace, "forgotten", func() bool { _, ok := e.terminals(id)[qid]; return !ok })
	if _, res, err := e.dialPTY(e.admin, id, "attach="+qid); err == nil || res == nil || res.StatusCode != http.StatusNotFound {
		t.Fatalf("attach to a forgotten terminal: %v %v", err, res)
	}
	_, other := e.newKey(e.newOrg("b", true), computerCaps)
	if _, res, err := e.dialPTY(other, id, "attach="+tid); err == nil || res == nil || res.StatusCode != http.StatusNotFound {
		t.Fatalf("another organisation's key: %v %v", err, res)
	}

	// DELETE hangs a terminal up.
	d := e.openPTY(e.admin, id, "argv=sleep&argv=1000")
	did := d.terminalID()
	r := e.do(e.admin, "DELETE", "/v1/computers/"+id+"/terminals/"+did, nil)
	var v terminalView
	r.json(t, &v)
	if r.code != http.StatusOK || v.Status != "exited" || v.ExitCode == nil {
		t.Fatalf("DELETE terminal: %s", r)
	}
	e.do(e.admin, "DELETE", "/v1/computers/"+id+"/terminals/term_nope", nil).wantError(t, http.StatusNotFound, "")
}

// TestPTYRefusedUpgradeRunsNothing: an upgrade that the WebSocket
// handshake refuses (a bad Sec-WebSocket-Key or version, a foreign
// Origin) is refused before the terminal's command starts: it was a 400
// or 403 after the command had run.
func TestPTYRefusedUpgradeRunsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.create(e.admin, nil).ID
	good := map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
		"Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
	for i, c := range []struct {
		header, value string
		code          int
	}{
		{"Sec-WebSocket-Key", "abc", http.StatusBadRequest},
		{"Sec-WebSocket-Version", "8", http.StatusBadRequest},
		{"Origin", "http://evil.example", http.StatusForbidden},
		{"Connection", "keep-alive", http.StatusBadRequest},
	} {
		hdr := maps.Clone(good)
		hdr[c.header] = c.value
		path := fmt.Sprintf("/v1/computers/%s/pty?argv=/usr/bin/touch&argv=/workspace/ran_%d", id, i)
		if r := e.doCtx(t.Context(), e.admin, "GET", path, nil, hdr); r.code != c.code {
			t.Errorf("%s: %s: %d %.200s, want %d", c.header, c.value, r.code, r.body, c.code)
		}
	}
	var audit struct{ Data []struct{ Type string } }
	e.do(e.admin, "GET", "/v1/audit?type=computer.terminal_opened", nil).json(t, &audit)
	if len(audit.Data) != 0 {
		t.Errorf("%d terminals opened for refused upgrades", len(audit.Data))
	}
	time.Sleep(500 * time.Millisecond) // a started touch would have run by now
	if out := e.sh(e.admin, id, "ls /workspace"); strings.Contains(out, "ran_") {
		t.Fatalf("refused upgrades ran their command: %q", out)
	}
}
