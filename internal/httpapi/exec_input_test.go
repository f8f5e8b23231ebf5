package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestExecInputIsNever5xx: what a client sends on exec (a NUL byte, a
// command line larger than execve or the control channel takes, a bad env
// or cwd) is refused before anything runs, with 400 or 413 naming the
// field, on the REST call (unary and SSE) and as a sentence from the exec
// tool; a command at the documented limit runs.
func TestExecInputIsNever5xx(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.create(e.admin, nil).ID
	path := "/v1/computers/" + id + "/exec"
	const limit = 128 << 10
	big := func(n int) string { return "#" + strings.Repeat("a", n-1) }
	bigArgv := []string{"echo"}
	for range 1500 {
		bigArgv = append(bigArgv, strings.Repeat("a", 1000))
	}
	for _, c := range []struct {
		body  map[string]any
		code  int
		param string
	}{
		{map[string]any{"command": "echo a\x00b"}, 400, "command"},
		{map[string]any{"command": big(900_000)}, 413, "command"},
		{map[string]any{"command": big(2_000_000)}, 413, "command"},
		{map[string]any{"command": big(limit)}, 413, "command"},
		{map[string]any{"argv": bigArgv}, 413, "argv[131]"},
		{map[string]any{"argv": []string{"echo", "a\x00b"}}, 400, "argv[1]"},
		{map[string]any{"command": "true", "env": map[string]string{"A": "a\x00b"}}, 400, "env.A"},
		{map[string]any{"command": "true", "env": map[string]string{"A=B": "x"}}, 400, "env"},
		{map[string]any{"command": "true", "env": map[string]string{"A": big(900_000)}}, 413, "env.A"},
		{map[string]any{"command": "true", "cwd": "a\x00b"}, 400, "cwd"},
		{map[string]any{"command": "true", "cwd": strings.Repeat("d/", 3000)}, 400, "cwd"},
	} {
		for _, hdr := range []map[string]string{nil, {"Accept": "text/event-stream"}} {
			r := e.doCtx(t.Context(), e.admin, "POST", path, c.body, hdr)
			er := r.wantError(t, c.code, "")
			if er.Error.Param == nil || *er.Error.Param != c.param {
				t.Errorf("param %v, want %q: %.300s", er.Error.Param, c.param, r)
			}
		}
	}
	atLimit := big(limit-10) + "\necho ran" // 131071 bytes: with its NUL, execve's limit for one argument
	var res execResult
	if r := e.do(e.admin, "POST", path, map[string]any{"command": atLimit}); r.code != http.StatusOK {
		t.Fatalf("a command at the limit: %d %.300s", r.code, r.body)
	} else if r.json(t, &res); res.Stdout != "ran\n" {
		t.Fatalf("a command at the limit: %+v", res)
	}

	for _, c := range []struct{ command, want string }{
		{"echo a\x00b", "Invalid arguments: command contains a NUL byte"},
		{big(900_000), "Invalid arguments: command is 900000 bytes; the limit is 131071."},
		{big(2_000_000), "Invalid arguments: command is 2000000 bytes; the limit is 131071."},
	} {
		a := e.tool(e.admin, id, "builtin__computer_exec", map[string]any{"command": c.command, "timeout_seconds": nil})
		if !a.IsError || !strings.HasPrefix(a.Output, c.want) {
			t.Errorf("exec tool: %.200q, want %q", a.Output, c.want)
		}
	}
	a := e.tool(e.admin, id, "builtin__computer_exec", map[string]any{"command": atLimit, "timeout_seconds": nil})
	if a.IsError || !strings.HasPrefix(a.Output, "exit_code: 0\nstdout:\nran\n") {
		t.Fatalf("exec tool at the limit: %.200s", a.Output)
	}
	if r := e.do(e.admin, "GET", "/v1/computers/"+id, nil); r.code != http.StatusOK {
		t.Fatalf("the computer after the refusals: %s", r)
	}
}
