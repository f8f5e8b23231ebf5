package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/errdefs/errhttp"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// Terminals: GET /v1/computers/{id}/pty upgrades to a WebSocket attached
// to a new process on a terminal of the computer (computer.OpenTerminal).
// Binary messages are the terminal's bytes both ways; text messages are
// JSON control: {"type":"resize","cols":N,"rows":N} from the client,
// {"type":"exit",…} (then a normal close) or {"type":"error",…} from the
// server. Closing the WebSocket hangs the terminal up: its processes get
// SIGHUP and what still runs 2 s later is killed. See docs/api.md,
// "Terminals".
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

// pty is GET /v1/computers/{id}/pty.
func (a *API) pty(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		return withParam("Upgrade", fmt.Errorf("%w: GET …/pty is a WebSocket; send an Upgrade: websocket request", errBadRequest))
	}
	req, err := ptyRequest(r)
	if err != nil {
		return err
	}
	if !a.sockets.add() {
		return fmt.Errorf("%w: %s", computer.ErrUnavailable, errhttp.ShuttingDownSentence)
	}
	defer a.sockets.wg.Done()
	var active atomic.Int64
	active.Store(time.Now().UnixNano())
	out := &ptyOut{q: make(chan []byte, ptyQueue), active: &active, stop: make(chan struct{})}
	// The terminal runs before the upgrade, so that a refusal (no such
	// computer, too many terminals) is an HTTP status.
	ctx := context.WithoutCancel(r.Context())
	t, err := a.comp.OpenTerminal(ctx, p, r.PathValue("id"), req, out)
	if err != nil {
		return err
	}
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		out.drop()
		t.Hangup()
		t.Wait()
		return nil // Accept answered the client
	}
	c.SetReadLimit(ptyMessage)
	stopShutdown := context.AfterFunc(a.sockets.ctx, func() {
		c.Close(websocket.StatusGoingAway, errhttp.ShuttingDownSentence)
	})
	defer stopShutdown()

	// Input and control from the client; its end (a close, an error)
	// hangs the terminal up.
	go func() {
		defer t.Hangup()
		for {
			typ, data, err := c.Read(ctx)
			if err != nil {
				return
			}
			active.Store(time.Now().UnixNano())
			if typ == websocket.MessageBinary {
				if t.Input(ctx, data) != nil {
					return
				}
				continue
			}
			var m ptyControl
			if err := json.Unmarshal(data, &m); err != nil {
				c.Close(websocket.StatusInvalidFramePayloadData, "a text message is a JSON control message")
				return
			}
			if m.Type == "resize" {
				if err := t.Resize(m.Cols, m.Rows); err != nil && errors.Is(err, sandbox.ErrInvalid) {
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
	waited := make(chan struct{})
	var st sandbox.ExitStatus
	var werr error
	go func() {
		st, werr = t.Wait()
		close(waited)
	}()
	for alive := true; ; {
		select {
		case b := <-out.q:
			if alive {
				alive = a.ptyWrite(ctx, c, websocket.MessageBinary, b)
				if !alive {
					out.drop()
					t.Hangup()
				}
			}
			continue
		case <-waited:
		}
		// Wait returned: every byte of output was given to out.
		for {
			select {
			case b := <-out.q:
				if alive {
					alive = a.ptyWrite(ctx, c, websocket.MessageBinary, b)
				}
				continue
			default:
			}
			break
		}
		break
	}
	out.drop()
	if werr != nil {
		msg, _ := json.Marshal(ptyControl{Type: "error", Message: werr.Error()})
		a.ptyWrite(ctx, c, websocket.MessageText, msg)
		c.Close(websocket.StatusInternalError, truncateReason(werr.Error()))
		return nil
	}
	d := st.Duration.Milliseconds()
	msg, _ := json.Marshal(ptyControl{Type: "exit", ExitCode: &st.ExitCode, Signal: &st.Signal, OOMKilled: st.OOMKilled, Duration: &d})
	a.ptyWrite(ctx, c, websocket.MessageText, msg)
	c.Close(websocket.StatusNormalClosure, "")
	return nil
}

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
