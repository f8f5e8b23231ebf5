package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

func TestJupyterRequest(t *testing.T) {
	now := time.Date(2026, 11, 30, 1, 2, 3, 456789000, time.UTC)
	frame, id, err := jupyterRequest("shell", "execute_request", "sess", executeContent("1+1"), now)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(frame, &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"channel", "header", "parent_header", "metadata", "content", "buffers"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("no %q in %s", k, frame)
		}
	}
	if string(raw["parent_header"]) != "{}" || string(raw["metadata"]) != "{}" {
		t.Errorf("parent_header %s, metadata %s: want {} for a request", raw["parent_header"], raw["metadata"])
	}
	m, err := parseJupyterMsg(frame)
	if err != nil {
		t.Fatal(err)
	}
	h := m.Header
	if m.Channel != "shell" || h.MsgType != "execute_request" || h.MsgID != id || len(id) != 32 || h.Session != "sess" ||
		h.Version != "5.3" || h.Date != "2026-11-30T01:02:03.456789Z" || h.Username == "" {
		t.Errorf("header %+v channel %q id %q", h, m.Channel, id)
	}
	if m.parentID() != "" {
		t.Errorf("a request has parent %q", m.parentID())
	}
	var c struct {
		Code         string `json:"code"`
		Silent       bool   `json:"silent"`
		StoreHistory bool   `json:"store_history"`
		AllowStdin   bool   `json:"allow_stdin"`
		StopOnError  bool   `json:"stop_on_error"`
	}
	if err := json.Unmarshal(m.Content, &c); err != nil || c.Code != "1+1" || c.Silent || !c.StoreHistory || c.AllowStdin {
		t.Errorf("content %s (%v)", m.Content, err)
	}
	_, id2, _ := jupyterRequest("shell", "execute_request", "sess", executeContent("1+1"), now)
	if id2 == id {
		t.Error("two requests got the same msg_id")
	}
}

func TestParseJupyterMsgRejects(t *testing.T) {
	for _, f := range []string{``, `[]`, `{"header":{"msg_type":"status"}}`, `{"channel":"iopub","header":{}}`, `{"channel":`} {
		if _, err := parseJupyterMsg([]byte(f)); err == nil {
			t.Errorf("parseJupyterMsg(%q) accepted", f)
		}
	}
}

// kmsg builds a kernel message as jupyter_server forwards it.
func kmsg(channel, msgType, parent, content string) jupyterMsg {
	ph := "{}"
	if parent != "" {
		ph = fmt.Sprintf(`{"msg_id":%q,"msg_type":"execute_request"}`, parent)
	}
	frame := fmt.Sprintf(`{"channel":%q,"header":{"msg_id":"x","msg_type":%q},"parent_header":%s,"metadata":{},"content":%s,"buffers":[]}`,
		channel, msgType, ph, content)
	m, err := parseJupyterMsg([]byte(frame))
	if err != nil {
		panic(err)
	}
	return m
}

var (
	busy   = `{"execution_state":"busy"}`
	idle   = `{"execution_state":"idle"}`
	result = `{"execution_count":1,"data":{"text/plain":"2"},"metadata":{}}`
	okRep  = `{"status":"ok","execution_count":1}`
)

func TestExecuteWaitCompletionRule(t *testing.T) {
	cases := []struct {
		name string
		msgs []jupyterMsg
		done int // index of the message that completes the request; -1: never
		err  string
	}{
		{"reply then idle", []jupyterMsg{
			kmsg("iopub", "status", "me", busy), kmsg("iopub", "execute_input", "me", `{"code":"1+1"}`),
			kmsg("iopub", "execute_result", "me", result), kmsg("shell", "execute_reply", "me", okRep),
			kmsg("iopub", "status", "me", idle)}, 4, ""},
		{"idle then reply", []jupyterMsg{
			kmsg("iopub", "status", "me", busy), kmsg("iopub", "execute_result", "me", result),
			kmsg("iopub", "status", "me", idle), kmsg("shell", "execute_reply", "me", okRep)}, 3, ""},
		{"other requests are ignored", []jupyterMsg{
			kmsg("iopub", "status", "nudge", idle), kmsg("shell", "execute_reply", "other", okRep),
			kmsg("iopub", "execute_result", "other", `{"data":{"text/plain":"3"}}`),
			kmsg("iopub", "execute_result", "me", result), kmsg("iopub", "status", "other", idle),
			kmsg("shell", "execute_reply", "me", okRep), kmsg("iopub", "status", "", idle),
			kmsg("iopub", "status", "me", idle)}, 7, ""},
		{"a reply alone is not complete", []jupyterMsg{
			kmsg("iopub", "execute_result", "me", result), kmsg("shell", "execute_reply", "me", okRep),
			kmsg("iopub", "status", "me", busy)}, -1, ""},
		{"idle on the wrong channel does not count", []jupyterMsg{
			kmsg("shell", "execute_reply", "me", okRep), kmsg("control", "status", "me", idle)}, -1, ""},
		{"error", []jupyterMsg{
			kmsg("iopub", "error", "me", `{"ename":"ZeroDivisionError","evalue":"division by zero","traceback":[]}`),
			kmsg("shell", "execute_reply", "me", `{"status":"error"}`), kmsg("iopub", "status", "me", idle)},
			2, `status "error" (ZeroDivisionError: division by zero)`},
		{"wrong result", []jupyterMsg{
			kmsg("iopub", "execute_result", "me", `{"data":{"text/plain":"3"}}`),
			kmsg("shell", "execute_reply", "me", okRep), kmsg("iopub", "status", "me", idle)}, 2, `execute_result "3"`},
		{"no result", []jupyterMsg{
			kmsg("shell", "execute_reply", "me", okRep), kmsg("iopub", "status", "me", idle)}, 1, `execute_result ""`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newExecuteWait("me")
			doneAt := -1
			for i, m := range tc.msgs {
				done, err := w.add(m)
				if err != nil {
					t.Fatalf("message %d: %v", i, err)
				}
				if done && doneAt < 0 {
					doneAt = i
				}
			}
			if doneAt != tc.done {
				t.Fatalf("complete at message %d, want %d", doneAt, tc.done)
			}
			err := w.check("2")
			switch {
			case tc.done < 0:
				if err == nil {
					t.Error("check passed an incomplete request")
				}
			case tc.err == "" && err != nil:
				t.Errorf("check: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("check = %v, want %q", err, tc.err)
			}
		})
	}
}

func TestExecuteWaitBadContent(t *testing.T) {
	w := newExecuteWait("me")
	if _, err := w.add(kmsg("shell", "execute_reply", "me", `"ok"`)); err == nil {
		t.Error("an execute_reply whose content is a string was accepted")
	}
	if _, err := w.add(kmsg("iopub", "execute_result", "me", `{"data":{"text/plain":2}}`)); err == nil {
		t.Error("a text/plain that is not a string was accepted")
	}
}

// TestChannelsExecute runs Execute against a fake jupyter_server
// WebSocket that publishes idle before the reply, with a nudge's messages
// in between, and checks the token and session it was opened with.
func TestChannelsExecute(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "token tok" || r.URL.Query().Get("session_id") == "" ||
			r.URL.Path != "/api/kernels/k1/channels" {
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		ctx := r.Context()
		for {
			_, b, err := c.Read(ctx)
			if err != nil {
				return
			}
			req, err := parseJupyterMsg(b)
			if err != nil {
				return
			}
			id, typ := req.Header.MsgID, req.Header.MsgType
			send := func(channel, msgType, parent, content string) {
				ph := fmt.Sprintf(`{"msg_id":%q}`, parent)
				c.Write(ctx, websocket.MessageText, fmt.Appendf(nil,
					`{"channel":%q,"header":{"msg_id":"s","msg_type":%q},"parent_header":%s,"metadata":{},"content":%s,"buffers":[]}`,
					channel, msgType, ph, content))
			}
			switch typ {
			case "kernel_info_request":
				send("iopub", "status", "nudge", idle)
				send("shell", "kernel_info_reply", id, `{"status":"ok"}`)
			case "execute_request":
				send("iopub", "status", id, busy)
				send("iopub", "status", "nudge", idle)
				send("iopub", "execute_result", id, result)
				send("iopub", "status", id, idle)
				send("shell", "execute_reply", "nudge", okRep)
				send("shell", "execute_reply", id, okRep)
			}
		}
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	j := &Jupyter{URL: srv.URL, Token: "tok"}
	if _, err := j.OpenChannels(ctx, "nope", false); err == nil {
		t.Error("opened the channels of an unknown kernel")
	}
	ch, err := j.OpenChannels(ctx, "k1", false)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.KernelInfo(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		d, err := ch.Execute(ctx, "1+1", "2")
		if err != nil || d <= 0 {
			t.Fatalf("Execute = %v, %v", d, err)
		}
	}
	if _, err := ch.Execute(ctx, "1+1", "3"); err == nil {
		t.Error("a wrong result passed")
	}
}

func TestJupyterCommandAndEnv(t *testing.T) {
	args := jupyterArgs("/usr/bin/python3", "tok", 4242, "/d/root")
	want := []string{"/usr/bin/python3", "-m", "jupyter_server", "--ServerApp.token=tok", "--ServerApp.port=4242",
		"--ServerApp.port_retries=0", "--ServerApp.ip=127.0.0.1", "--no-browser", "--ServerApp.root_dir=/d/root", "--allow-root"}
	if strings.Join(args, " ") != strings.Join(want, " ") {
		t.Errorf("args %q", args)
	}
	env := jupyterEnv([]string{"PATH=/bin", "JUPYTER_CONFIG_DIR=/home/u/.jupyter", "IPYTHONDIR=/x", "HOME=/root"}, "/d")
	got := strings.Join(env, " ")
	for _, w := range []string{"PATH=/bin", "HOME=/root", "JUPYTER_CONFIG_DIR=/d/config", "JUPYTER_DATA_DIR=/d/data",
		"JUPYTER_RUNTIME_DIR=/d/runtime", "IPYTHONDIR=/d/ipython"} {
		if !strings.Contains(got+" ", w+" ") {
			t.Errorf("env lacks %s: %q", w, env)
		}
	}
	if strings.Contains(got, "/home/u/.jupyter") || strings.Contains(got, "IPYTHONDIR=/x") {
		t.Errorf("the caller's Jupyter dirs leak through: %q", env)
	}
}
