package bench

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// This file holds the pure part of the jupyter_server peer: building and
// parsing Jupyter messages as jupyter_server 1.x carries them over its
// WebSocket (one JSON text frame per message, with a "channel" field), and
// the rule that says when an execute_request is complete.

// jupyterProtocolVersion is the messaging protocol version the bench
// speaks (ipykernel 6 implements 5.3).
const jupyterProtocolVersion = "5.3"

// jupyterHeader is a Jupyter message header.
type jupyterHeader struct {
	MsgID    string `json:"msg_id"`
	MsgType  string `json:"msg_type"`
	Username string `json:"username"`
	Session  string `json:"session"`
	Date     string `json:"date"`
	Version  string `json:"version"`
}

// jupyterMsg is one message on jupyter_server's channels WebSocket.
type jupyterMsg struct {
	Channel string        `json:"channel"`
	Header  jupyterHeader `json:"header"`
	// ParentHeader is {} on a request; on a reply or an iopub message it
	// names the request it belongs to.
	ParentHeader json.RawMessage `json:"parent_header"`
	Metadata     json.RawMessage `json:"metadata"`
	Content      json.RawMessage `json:"content"`
	Buffers      []any           `json:"buffers"`
}

// newJupyterID returns a random hex id for messages and sessions.
func newJupyterID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// jupyterRequest builds a request message for channel with a fresh
// msg_id, and returns the encoded frame and the msg_id.
func jupyterRequest(channel, msgType, session string, content any, now time.Time) ([]byte, string, error) {
	c, err := json.Marshal(content)
	if err != nil {
		return nil, "", err
	}
	m := jupyterMsg{
		Channel: channel,
		Header: jupyterHeader{MsgID: newJupyterID(), MsgType: msgType, Username: "cubicle-bench", Session: session,
			Date: now.UTC().Format("2006-01-02T15:04:05.000000Z"), Version: jupyterProtocolVersion},
		ParentHeader: json.RawMessage("{}"),
		Metadata:     json.RawMessage("{}"),
		Content:      c,
		Buffers:      []any{},
	}
	b, err := json.Marshal(m)
	return b, m.Header.MsgID, err
}

// executeContent is the content of an execute_request for code, as a
// notebook front end sends it.
func executeContent(code string) map[string]any {
	return map[string]any{
		"code": code, "silent": false, "store_history": true,
		"user_expressions": map[string]any{}, "allow_stdin": false, "stop_on_error": true,
	}
}

// parseJupyterMsg decodes one frame. It needs a channel and a msg_type.
func parseJupyterMsg(frame []byte) (jupyterMsg, error) {
	var m jupyterMsg
	if err := json.Unmarshal(frame, &m); err != nil {
		return m, fmt.Errorf("jupyter message: %w", err)
	}
	if m.Channel == "" || m.Header.MsgType == "" {
		return m, fmt.Errorf("jupyter message without channel or msg_type: %.200s", frame)
	}
	return m, nil
}

// parentID is the msg_id of the request m answers ("" for none).
func (m jupyterMsg) parentID() string {
	var p struct {
		MsgID string `json:"msg_id"`
	}
	if len(m.ParentHeader) == 0 || json.Unmarshal(m.ParentHeader, &p) != nil {
		return ""
	}
	return p.MsgID
}

// executeWait follows one execute_request to its completion, by the rule
// a Jupyter client uses: the request is done once both its execute_reply
// (shell) and the kernel's status "idle" (iopub) for that request arrived,
// in either order. Only then has every output of the request been
// published. Messages for other requests (such as the kernel_info nudges
// jupyter_server sends when a WebSocket opens) are ignored.
type executeWait struct {
	msgID string

	replied bool
	idle    bool
	// Status is the execute_reply's status: ok, error or aborted.
	Status string
	// Result is the text/plain of the execute_result, if any.
	Result string
	// Error is "ename: evalue" of an error the kernel published.
	Error string
}

func newExecuteWait(msgID string) *executeWait { return &executeWait{msgID: msgID} }

// add takes one message and says whether the request is complete.
func (w *executeWait) add(m jupyterMsg) (done bool, err error) {
	if m.parentID() != w.msgID {
		return w.done(), nil
	}
	switch {
	case m.Channel == "shell" && m.Header.MsgType == "execute_reply":
		var c struct{ Status string }
		if err := json.Unmarshal(m.Content, &c); err != nil {
			return false, fmt.Errorf("execute_reply: %w", err)
		}
		w.replied, w.Status = true, c.Status
	case m.Channel == "iopub" && m.Header.MsgType == "status":
		var c struct {
			ExecutionState string `json:"execution_state"`
		}
		if err := json.Unmarshal(m.Content, &c); err != nil {
			return false, fmt.Errorf("status: %w", err)
		}
		if c.ExecutionState == "idle" {
			w.idle = true
		}
	case m.Channel == "iopub" && m.Header.MsgType == "execute_result":
		var c struct {
			Data map[string]json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(m.Content, &c); err != nil {
			return false, fmt.Errorf("execute_result: %w", err)
		}
		if raw, ok := c.Data["text/plain"]; ok {
			if err := json.Unmarshal(raw, &w.Result); err != nil {
				return false, fmt.Errorf("execute_result text/plain: %w", err)
			}
		}
	case m.Channel == "iopub" && m.Header.MsgType == "error":
		var c struct{ Ename, Evalue string }
		json.Unmarshal(m.Content, &c)
		w.Error = c.Ename + ": " + c.Evalue
	}
	return w.done(), nil
}

func (w *executeWait) done() bool { return w.replied && w.idle }

// check says whether a completed request succeeded with the wanted
// text/plain result.
func (w *executeWait) check(want string) error {
	switch {
	case !w.done():
		return errors.New("execute_request not complete")
	case w.Status != "ok":
		if w.Error != "" {
			return fmt.Errorf("execute_reply status %q (%s)", w.Status, w.Error)
		}
		return fmt.Errorf("execute_reply status %q", w.Status)
	case w.Result != want:
		return fmt.Errorf("execute_result %q, want %q", w.Result, want)
	}
	return nil
}
