package httpapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
	"github.com/cubicle-sandbox/cubicle/internal/errdefs/errhttp"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// Terminals: GET /v1/computers/{id}/pty upgrades to a WebSocket attached
// to a new process on a terminal of the computer (computer.OpenTerminal),
// or with ?attach=term_… to a terminal that runs (computer.Terminal).
// Binary messages are the terminal's bytes both ways; text messages are
// JSON control: {"type":"resize","cols":N,"rows":N} from the client,
// {"type":"terminal","id":…} first, {"type":"exit",…} (then a normal
// close) or {"type":"error",…} from the server. A close with 1000 hangs
// the terminal up (SIGHUP, and what still runs 2 s later is killed); any
// other end of the connection detaches it for the grace period. GET
// /v1/computers/{id}/terminals lists them. See docs/api.md, "Terminals".
const (
	// ptyMessage bounds one message from the client.
	ptyMessage = 64 << 10
	// ptyQueue bounds the output chunks (each at most 32 KiB) waiting for
	// the client; a full queue holds the terminal's process back.
	ptyQueue = 64
	// ptyPing is how often the server pings the client, and how long it
	// waits for the pong; ptyIdle ends a terminal with neither input nor
	// output for that long.
	ptyPing = 30 * time.Second
	ptyIdle = time.Hour
)

// ptyControl is a text message, both ways.
type ptyControl struct {
	Type      string `json:"type"`
	ID        string `json:"id,omitempty"` // the terminal's (term_…), in the first message
	Cols      int    `json:"cols,omitempty"`
	Rows      int    `json:"rows,omitempty"`
	ExitCode  *int   `json:"exit_code,omitempty"`
	Signal    *int   `json:"signal,omitempty"`
	OOMKilled bool   `json:"oom_killed,omitempty"`
	Duration  *int64 `json:"duration_ms,omitempty"`
	Message   string `json:"message,omitempty"`
}

// terminalSize is the cols or rows parameter s (def when empty).
func terminalSize(name, s string, def int) (int, error) {
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > sandbox.MaxTerminalSize {
		return 0, withParam(name, fmt.Errorf("%w: %s must be between 1 and %d, got %q", errBadRequest, name, sandbox.MaxTerminalSize, s))
	}
	return n, nil
}

// ptyRequest reads the query of GET …/pty: command or argv (repeated),
// cwd, env (repeated NAME=value), cols and rows (default 80×24). Without
// a command it is the user's login shell, /bin/bash -l.
func ptyRequest(r *http.Request) (computer.TerminalRequest, error) {
	q := r.URL.Query()
	req := computer.TerminalRequest{Cols: 80, Rows: 24}
	req.Command, req.Argv, req.Cwd = q.Get("command"), q["argv"], q.Get("cwd")
	if req.Command == "" && len(req.Argv) == 0 {
		req.Argv = []string{"/bin/bash", "-l"}
	}
	for _, kv := range q["env"] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return req, withParam("env", fmt.Errorf("%w: env must be NAME=value, got %q", errBadRequest, kv))
		}
		if req.Env == nil {
			req.Env = map[string]string{}
		}
		req.Env[k] = v
	}
	var err error
	if req.Cols, err = terminalSize("cols", q.Get("cols"), req.Cols); err != nil {
		return req, err
	}
	if req.Rows, err = terminalSize("rows", q.Get("rows"), req.Rows); err != nil {
		return req, err
	}
	return req, nil
}

// wsToken lets a WebSocket upgrade carry its key as ?token= (browsers
// cannot set headers on one), as the Jupyter API does; a request with an
// Authorization header, or no upgrade, is left as it is.
func wsToken(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if t := r.URL.Query().Get("token"); t != "" && r.Header.Get("Authorization") == "" &&
			strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			r.Header.Set("Authorization", "Bearer "+t)
		}
		h.ServeHTTP(w, r)
	})
}

// ptyOut is the terminal's output on its way to the client: a bounded
// queue that the terminal's reader fills (blocking when it is full) and
// the socket's writer drains.
type ptyOut struct {
	q        chan []byte
	active   *atomic.Int64 // unix nanoseconds of the last input or output
	stopOnce sync.Once
	stop     chan struct{} // closed when the client is gone: output is dropped
}

func (o *ptyOut) Write(b []byte) (int, error) {
	o.active.Store(time.Now().UnixNano())
	select {
	case o.q <- append([]byte(nil), b...):
	case <-o.stop:
	}
	return len(b), nil
}

func (o *ptyOut) drop() { o.stopOnce.Do(func() { close(o.stop) }) }

// pty is GET /v1/computers/{id}/pty: a new terminal, or with
// ?attach=term_… an existing one (its scrollback, then its output).
func (a *API) pty(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		return withParam("Upgrade", fmt.Errorf("%w: GET …/pty is a WebSocket; send an Upgrade: websocket request", errBadRequest))
	}
	if err := upgradeRefusal(r); err != nil {
		return err
	}
	// The terminal is found or started before the upgrade, so that a
	// refusal (no such computer or terminal, too many terminals) is an
	// HTTP status.
	ctx := context.WithoutCancel(r.Context())
	tid := r.URL.Query().Get("attach")
	req, err := ptyRequest(r)
	if err != nil && tid == "" {
		return err
	}
	if !a.sockets.add() {
		return fmt.Errorf("%w: %s", computer.ErrUnavailable, errhttp.ShuttingDownSentence)
	}
	defer a.sockets.wg.Done()
	var s *computer.TerminalSession
	if tid != "" {
		if s, err = a.comp.Terminal(ctx, p, r.PathValue("id"), tid); err != nil {
			return err
		}
	} else if s, err = a.comp.OpenTerminal(ctx, p, r.PathValue("id"), req); err != nil {
		return err
	}
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		if tid == "" {
			s.Hangup() // nobody ever had it
		}
		return nil // Accept answered the client
	}
	c.SetReadLimit(ptyMessage)
	stopShutdown := context.AfterFunc(a.sockets.ctx, func() {
		c.Close(websocket.StatusGoingAway, errhttp.ShuttingDownSentence)
	})
	defer stopShutdown()
	a.attachPTY(ctx, c, s)
	return nil
}

// attachPTY serves one client of a terminal session until the terminal
// ends, the client leaves (a close with 1000 hangs the terminal up, any
// other end detaches it) or another client takes it over.
func (a *API) attachPTY(ctx context.Context, c *websocket.Conn, s *computer.TerminalSession) {
	var active atomic.Int64
	active.Store(time.Now().UnixNano())
	out := &ptyOut{q: make(chan []byte, ptyQueue), active: &active, stop: make(chan struct{})}
	scrollback, att := s.Attach(out)
	var hangup atomic.Bool // the client asked for the end: a hangup, not a detach
	defer func() {
		att.Detach(hangup.Load())
		out.drop()
		c.CloseNow()
	}()
	info := s.Info()
	hello, _ := json.Marshal(ptyControl{Type: "terminal", ID: s.ID(), Cols: info.Cols, Rows: info.Rows})
	if !a.ptyWrite(ctx, c, websocket.MessageText, hello) {
		return
	}
	for len(scrollback) > 0 {
		n := min(len(scrollback), ptyMessage)
		if !a.ptyWrite(ctx, c, websocket.MessageBinary, scrollback[:n]) {
			return
		}
		scrollback = scrollback[n:]
	}

	// Input and control from the client; its end (a close, an error)
	// ends the attachment.
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		for {
			typ, data, err := c.Read(ctx)
			if err != nil {
				hangup.Store(websocket.CloseStatus(err) == websocket.StatusNormalClosure)
				return
			}
			active.Store(time.Now().UnixNano())
			if typ == websocket.MessageBinary {
				s.Input(ctx, data) // fails only once the terminal ended: its exit follows
				continue
			}
			var m ptyControl
			if err := json.Unmarshal(data, &m); err != nil {
				c.Close(websocket.StatusInvalidFramePayloadData, "a text message is a JSON control message")
				return
			}
			if m.Type == "resize" {
				if err := s.Resize(m.Cols, m.Rows); err != nil && errors.Is(err, sandbox.ErrInvalid) {
					c.Close(websocket.StatusPolicyViolation, truncateReason(err.Error()))
					return
				}
			} // other types are ignored
		}
	}()

	// Liveness: a ping every ptyPing, and the idle bound.
	pingDone := make(chan struct{})
	defer close(pingDone)
	go func() {
		tick := time.NewTicker(ptyPing)
		defer tick.Stop()
		for {
			select {
			case <-pingDone:
				return
			case <-tick.C:
			}
			if time.Since(time.Unix(0, active.Load())) > ptyIdle {
				s.Hangup()
				c.Close(websocket.StatusNormalClosure, "idle for too long")
				return
			}
			pctx, cancel := context.WithTimeout(ctx, ptyPing)
			err := c.Ping(pctx)
			cancel()
			if err != nil {
				c.Close(websocket.StatusGoingAway, "no answer to a ping")
				return
			}
		}
	}()

	// Output to the client until the terminal ended, then its exit.
	for {
		select {
		case b := <-out.q:
			if !a.ptyWrite(ctx, c, websocket.MessageBinary, b) {
				c.CloseNow()
				return
			}
			continue
		case <-gone:
			c.CloseNow()
			return
		case <-att.Replaced():
			out.drop()
			c.Close(ptyReplaced, "another client attached to this terminal")
			return
		case <-s.Done():
		}
		break
	}
	// Done: every byte of output was given to out.
	for drained := false; !drained; {
		select {
		case b := <-out.q:
			if !a.ptyWrite(ctx, c, websocket.MessageBinary, b) {
				return
			}
		default:
			drained = true
		}
	}
	st, werr := s.Wait()
	if werr != nil {
		msg, _ := json.Marshal(ptyControl{Type: "error", Message: werr.Error()})
		a.ptyWrite(ctx, c, websocket.MessageText, msg)
		c.Close(websocket.StatusInternalError, truncateReason(werr.Error()))
		return
	}
	d := st.Duration.Milliseconds()
	msg, _ := json.Marshal(ptyControl{Type: "exit", ExitCode: &st.ExitCode, Signal: &st.Signal, OOMKilled: st.OOMKilled, Duration: &d})
	a.ptyWrite(ctx, c, websocket.MessageText, msg)
	c.Close(websocket.StatusNormalClosure, "")
}

// ptyReplaced closes a client's socket when another took its terminal over.
const ptyReplaced = websocket.StatusCode(4001)

// ptyWrite sends one message, bounded by wsWriteTimeout; false when the
// client is gone.
func (a *API) ptyWrite(ctx context.Context, c *websocket.Conn, typ websocket.MessageType, b []byte) bool {
	wctx, cancel := context.WithTimeout(ctx, wsWriteTimeout)
	defer cancel()
	return c.Write(wctx, typ, b) == nil
}

// truncateReason keeps a close reason within the 123 bytes a close frame
// carries.
func truncateReason(s string) string {
	if len(s) > 120 {
		return s[:120]
	}
	return s
}

// terminalView is a terminal session (GET …/terminals).
type terminalView struct {
	ID         string   `json:"id"`
	Object     string   `json:"object"`
	Pid        int      `json:"pid"`
	Command    string   `json:"command,omitempty"`
	Argv       []string `json:"argv,omitempty"`
	Cwd        string   `json:"cwd,omitempty"`
	Cols       int      `json:"cols"`
	Rows       int      `json:"rows"`
	Status     string   `json:"status"`
	Attached   bool     `json:"attached"`
	ExitCode   *int     `json:"exit_code"`
	Signal     int      `json:"signal,omitempty"`
	CreatedAt  int64    `json:"created_at"`
	DetachedAt *int64   `json:"detached_at"`
}

func terminalViewOf(in computer.TerminalInfo) terminalView {
	v := terminalView{ID: in.ID, Object: "terminal", Pid: in.Pid, Command: in.Command, Argv: in.Argv, Cwd: in.Cwd,
		Cols: in.Cols, Rows: in.Rows, Status: "running", Attached: in.Attached, CreatedAt: in.CreatedAt.Unix()}
	if in.Exit != nil {
		v.Status, v.ExitCode, v.Signal = "exited", &in.Exit.ExitCode, in.Exit.Signal
	}
	if !in.Attached && !in.DetachedAt.IsZero() {
		t := in.DetachedAt.Unix()
		v.DetachedAt = &t
	}
	return v
}

// listTerminals is GET /v1/computers/{id}/terminals: the terminal
// sessions, running or ended within their grace period, oldest first.
func (a *API) listTerminals(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	list, err := a.comp.ListTerminals(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	data := make([]terminalView, len(list))
	for i, in := range list {
		data[i] = terminalViewOf(in)
	}
	page, err := listPage(r, data, func(v terminalView) string { return v.ID }, false)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// terminalEndWait bounds how long DELETE …/terminals/{tid} waits for the
// hung-up terminal to end (its processes have 2 s before they are killed).
const terminalEndWait = 5 * time.Second

// deleteTerminal is DELETE /v1/computers/{id}/terminals/{tid}: hangs the
// terminal up; the terminal once it ended.
func (a *API) deleteTerminal(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	s, err := a.comp.Terminal(r.Context(), p, r.PathValue("id"), r.PathValue("tid"))
	if err != nil {
		return err
	}
	s.Hangup()
	t := time.NewTimer(terminalEndWait)
	defer t.Stop()
	select {
	case <-s.Done():
	case <-t.C:
	case <-r.Context().Done():
	}
	writeJSON(w, http.StatusOK, terminalViewOf(s.Info()))
	return nil
}

// upgradeRefusal is why websocket.Accept would refuse r, found before
// anything is started for the connection: Accept's refusal came after the
// terminal's command had started (a 400 for a bad Sec-WebSocket-Key, and
// the command ran anyway).
func upgradeRefusal(r *http.Request) error {
	keys := r.Header.Values("Sec-WebSocket-Key")
	switch {
	case !headerHasToken(r.Header, "Connection", "upgrade") || !headerHasToken(r.Header, "Upgrade", "websocket"):
		return withParam("Connection", fmt.Errorf("%w: a WebSocket upgrade needs Connection: Upgrade and Upgrade: websocket", errBadRequest))
	case r.Header.Get("Sec-WebSocket-Version") != "13":
		return withParam("Sec-WebSocket-Version", fmt.Errorf("%w: only WebSocket version 13 is served", errBadRequest))
	case len(keys) != 1 || !validWebSocketKey(keys[0]):
		return withParam("Sec-WebSocket-Key", fmt.Errorf("%w: Sec-WebSocket-Key must be one base64 value of 16 bytes", errBadRequest))
	}
	if o := r.Header.Get("Origin"); o != "" {
		if u, err := url.Parse(o); err != nil || !strings.EqualFold(u.Host, r.Host) {
			return errdefs.New(errdefs.PermissionDenied, "", "the request's Origin "+strconv.Quote(o)+" is not this server")
		}
	}
	return nil
}

func validWebSocketKey(k string) bool {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(k))
	return err == nil && len(b) == 16
}

// headerHasToken reports whether a comma-separated header of h names
// token (in any case).
func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}
