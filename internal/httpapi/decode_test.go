package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestDecodeRefusesFoldedAndDuplicateKeys: encoding/json alone would run
// {"COMMAND":…} and apply {"Memory_MB":64} (it matches names in any case)
// and take the last of duplicate keys; every JSON body is refused instead,
// with 400 naming the field, before anything happens. Wrong types are named
// with JSON types, never Go type names.
func TestDecodeRefusesFoldedAndDuplicateKeys(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.create(e.admin, nil).ID
	_, key := e.newKey("", computerCaps)
	e.withGateway(sixTimesSeven(t))
	exec := "/v1/computers/" + id + "/exec"
	for _, c := range []struct{ path, body, param, msg string }{
		{exec, `{"COMMAND":"touch /workspace/ran"}`, "COMMAND", `case-sensitive: \"command\"`},
		{exec, `{"command":"true","command":"touch /workspace/ran"}`, "command", `duplicate field \"command\"`},
		{exec, `{"command":"touch /workspace/ran","env":{"A":"1","A":"2"}}`, "env.A", "duplicate"},
		{exec, `{"command":"touch /workspace/ran","env":{"A":1}}`, "env.A", "env.A must be a string"},
		{"/v1/computers", `{"Memory_MB":64}`, "Memory_MB", `case-sensitive: \"memory_mb\"`},
		{"/v1/computers", `{"metadata":{"a":"1","a":"2"}}`, "metadata.a", "duplicate"},
		{"/v1/computers", `{"metadata":{"k":1}}`, "metadata.k", "metadata.k must be a string"},
		{"/v1/computers", `[]`, "", "the body must be a JSON object"},
		{"/v1/computers", `{"lifetime_seconds":"long"}`, "lifetime_seconds", "lifetime_seconds must be an integer"},
		{"/v1/computers/" + id + "/python", `{"cells":[{"code":"1","Code":"2"}]}`, "cells[0].Code", "case-sensitive"},
		{"/v1/computers/" + id + "/python", `{"cells":["print(1)"]}`, "cells[0]", "cells[0] must be an object"},
		{"/v1/computers/" + id + "/tools/builtin__computer_exec", `{"arguments":{"command":"true","command":"touch ran"}}`, "arguments.command", "duplicate"},
		{"/v1/computers/" + id + "/tools/builtin__computer_exec", `{"arguments":{"COMMAND":"touch /workspace/ran","timeout_seconds":null}}`, "arguments.COMMAND", "case-sensitive"},
		{"/v1/computers/" + id + "/tools/builtin__computer_exec", `{"arguments":"{\"command\":\"true\",\"command\":\"touch ran\"}"}`, "arguments.command", "duplicate"},
		{"/v1/admin/orgs", `{"name":"a","Name":"b"}`, "Name", "case-sensitive"},
		{"/v1/responses", `{"model":"m","input":"hi","INPUT":"x"}`, "INPUT", "case-sensitive"},
		{"/v1/responses", `{"model":"m","input":"hi","input":"again"}`, "input", "duplicate"},
		{"/v1/responses", `{"model":"m","input":[{"role":"user","content":"a","content":"b"}]}`, "input[0].content", "duplicate"},
	} {
		r := e.do(e.admin, "POST", c.path, c.body)
		if c.path == "/v1/responses" {
			r = e.do(key, "POST", c.path, c.body)
		}
		er := r.wantError(t, http.StatusBadRequest, "invalid_request")
		got := ""
		if er.Error.Param != nil {
			got = *er.Error.Param
		}
		if got != c.param || !strings.Contains(string(r.body), c.msg) {
			t.Errorf("%s %s: %s, want param %q and %q", c.path, c.body, r, c.param, c.msg)
		}
		if strings.Contains(er.Error.Message, "computer.") || strings.Contains(er.Error.Message, "agent.") {
			t.Errorf("%s %s: a Go type name: %s", c.path, c.body, r)
		}
	}
	if r := e.do(e.admin, "GET", "/v1/computers/"+id+"/files/ran", nil); r.code != http.StatusNotFound {
		t.Fatalf("a refused exec ran: %s", r)
	}
	var l struct {
		Data []view `json:"data"`
	}
	e.do(e.admin, "GET", "/v1/computers?status=all", nil).json(t, &l)
	if len(l.Data) != 1 {
		t.Fatalf("refused creates made computers: %+v", l.Data)
	}

	// The Responses WebSocket: a frame with a duplicate key is an error
	// event, and the connection stays usable.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wsURL := "ws" + strings.TrimPrefix(e.url, "http") + "/v1/responses"
	c, _, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + key}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	for _, frame := range []string{
		`{"type":"response.create","model":"m","input":"a","input":"b"}`,
		`{"type":"response.create","TYPE":"x","model":"m","input":"a"}`,
	} {
		c.Write(ctx, websocket.MessageText, []byte(frame))
		_, data, err := c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ev struct {
			Type  string `json:"type"`
			Error struct {
				Param string `json:"param"`
			} `json:"error"`
		}
		json.Unmarshal(data, &ev)
		if ev.Type != "error" || (ev.Error.Param != "input" && ev.Error.Param != "TYPE") {
			t.Fatalf("frame %s: %s", frame, data)
		}
	}
}
