package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/responses"
)

// TestTimeoutAlias: exec and python take their timeout as timeout_seconds
// or as its alias timeout; both at once must agree, else 400 naming the
// fields.
func TestTimeoutAlias(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.create(e.admin, map[string]any{}).ID
	for _, field := range []string{"timeout_seconds", "timeout"} {
		res := e.exec(e.admin, id, map[string]any{"command": "sleep 5", field: 1})
		if !res.TimedOut || !strings.Contains(res.Stderr, "timed out after 1 seconds") {
			t.Errorf("exec with %s 1: %+v", field, res)
		}
	}
	if res := e.exec(e.admin, id, map[string]any{"command": "echo same", "timeout_seconds": 5, "timeout": 5}); res.Stdout != "same\n" {
		t.Errorf("exec with equal timeouts: %+v", res)
	}
	for _, path := range []string{"exec", "python"} {
		body := map[string]any{"command": "true", "timeout_seconds": 5, "timeout": 6}
		if path == "python" {
			body = map[string]any{"cells": []map[string]any{{"code": "1"}}, "timeout_seconds": 5, "timeout": 6}
		}
		r := e.do(e.admin, "POST", "/v1/computers/"+id+"/"+path, body)
		er := r.wantError(t, http.StatusBadRequest, "")
		if er.Error.Param == nil || *er.Error.Param != "timeout_seconds" ||
			!strings.Contains(er.Error.Message, "timeout_seconds") || !strings.Contains(er.Error.Message, "timeout (6)") {
			t.Errorf("%s with different timeouts: %s", path, r)
		}
	}
	for _, field := range []string{"timeout_seconds", "timeout"} {
		var res struct {
			TimedOut bool `json:"timed_out"`
		}
		r := e.do(e.admin, "POST", "/v1/computers/"+id+"/python",
			map[string]any{"cells": []map[string]any{{"code": "import time; time.sleep(30)"}}, field: 1})
		if r.code != http.StatusOK {
			t.Fatalf("python with %s 1: %s", field, r)
		}
		if r.json(t, &res); !res.TimedOut {
			t.Errorf("python with %s 1 did not time out: %s", field, r)
		}
		r = e.do(e.admin, "POST", "/v1/computers/"+id+"/python", map[string]any{"cells": []map[string]any{{"code": "1"}}, field: 601})
		if er := r.wantError(t, http.StatusBadRequest, ""); er.Error.Param == nil || *er.Error.Param != field {
			t.Errorf("python with %s 601 names %v: %s", field, er.Error.Param, r)
		}
	}
}

// TestCallMetrics: exec, python and tool calls each count into their own
// series of /metrics.
func TestCallMetrics(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	_, key := e.newKey("", computerCaps)
	id := e.create(key, map[string]any{}).ID
	e.sh(key, id, "true")
	if r := e.do(key, "POST", "/v1/computers/"+id+"/python", map[string]any{"cells": []map[string]any{{"code": "1"}}}); r.code != http.StatusOK {
		t.Fatalf("python: %s", r)
	}
	e.tool(key, id, "builtin__computer_exec", map[string]any{"command": "true", "timeout_seconds": nil})
	e.tool(key, id, "builtin__computer_exec", map[string]any{"command": "exit 3", "timeout_seconds": nil})
	e.tool(key, id, "builtin__computer_read_file", map[string]any{"path": "missing.txt"})
	for name, want := range map[string]float64{
		"cubicle_exec_duration_seconds_count":                                           1,
		"cubicle_python_duration_seconds_count":                                         1,
		`cubicle_python_duration_seconds_bucket{le="+Inf"}`:                             1,
		"cubicle_tool_duration_seconds_count":                                           3,
		`cubicle_tool_calls_total{tool="builtin__computer_exec",outcome="ok"}`:          2,
		`cubicle_tool_calls_total{tool="builtin__computer_read_file",outcome="failed"}`: 1,
	} {
		if got := e.metric(name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	r := e.do("", "GET", "/metrics", nil)
	for _, want := range []string{"# TYPE cubicle_python_duration_seconds histogram", "# TYPE cubicle_tool_duration_seconds histogram",
		"# TYPE cubicle_tool_calls_total counter"} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("metrics lack %q:\n%s", want, r.body)
		}
	}
}

// TestComputersDisabled: computers.enabled = false refuses new computers
// with a sentence naming the key, and lists no computer tool.
func TestComputersDisabled(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *computer.Config) { c.Disabled = true })
	_, key := e.newKey("", computerCaps)
	r := e.do(key, "POST", "/v1/computers", map[string]any{})
	if er := r.wantError(t, http.StatusForbidden, "forbidden"); !strings.Contains(er.Error.Message, "computers.enabled = false") {
		t.Fatalf("create: %s", r)
	}
	r = e.do(key, "GET", "/v1/tools", nil)
	if r.code != http.StatusOK || strings.Contains(string(r.body), "builtin__computer") {
		t.Fatalf("tools of a deployment without computers: %s", r)
	}
	e.withGatewayConfig(responses.Config{UpstreamURL: "http://127.0.0.1:9/v1", Model: "m"})
	r = e.do(key, "POST", "/v1/responses", map[string]any{"input": "hi", "tools": []any{map[string]any{"type": "code_interpreter", "container": map[string]any{"type": "auto"}}}})
	if er := r.wantError(t, http.StatusBadRequest, "computer_not_configured"); er.Error.Param == nil || *er.Error.Param != "tools" {
		t.Fatalf("code_interpreter without computers: %s", r)
	}
}
