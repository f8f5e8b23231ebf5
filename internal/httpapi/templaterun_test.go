package httpapi_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/template"
	"github.com/cubicle-sandbox/cubicle/internal/template/templatetest"
)

// toolsStore is a template store in dir holding "tools"
// (templatetest.ToolsRoot: a shell, a few tools and Python, no ipykernel).
func toolsStore(t *testing.T, dir string) *template.Store {
	t.Helper()
	return storeWith(t, dir, "tools", templatetest.ToolsRoot(t, t.TempDir()), "PATH=/usr/bin:/bin")
}

// pyStep is a run step running Python code (given with single quotes only).
func pyStep(code string) string { return `python3 -c "` + code + `"` }

// TestTemplateRunSteps: run steps execute in a build computer on the root
// built so far, as root of its user namespace, each step's changes a layer
// (new files, a deletion, a directory replaced (opaque), a hard link, a
// file given to the computer's user, a setuid bit that does not survive),
// with the spec's env; the build's log
// streams each step's output. A computer made from the result sees it all.
func TestTemplateRunSteps(t *testing.T) {
	dir := t.TempDir()
	e := newEnvIn(t, dir, func(c *computer.Config) { c.Templates = toolsStore(t, dir) })
	_, key := e.newKey(e.newOrg("t", true), computerCaps)
	spec := map[string]any{"base": "tools", "env": []string{"GREETING=hi"}, "run": []string{
		"echo step one says $GREETING; id -u; " + pyStep("import os; os.makedirs('/opt/app'); open('/opt/app/hello', 'w').write(os.environ['GREETING']); "+
			"os.makedirs('/opt/old'); open('/opt/old/a', 'w'); open('/opt/old/b', 'w')"),
		pyStep("import os; os.remove('/etc/os-release'); open('/opt/app/mine', 'w').write('u'); os.chown('/opt/app/mine', 1000, 1000); " +
			"open('/opt/app/suid', 'w').write('s'); os.chmod('/opt/app/suid', 0o4755); os.link('/opt/app/hello', '/opt/app/again'); " +
			"import shutil; shutil.rmtree('/opt/old'); os.mkdir('/opt/old'); open('/opt/old/c', 'w')"),
		"cat /opt/app/hello > /opt/app/copied && echo done",
	}}
	r := e.doCtx(context.Background(), e.admin, "POST", "/v1/templates", map[string]any{"name": "app", "spec": spec},
		map[string]string{"Accept": "text/event-stream"})
	s := string(r.body)
	for _, want := range []string{
		`"step":"run","layer":1,"layers":3,`, `"message":"step one says hi"`, `"message":"0"`, `"step":"run","layer":3,"layers":3,`,
		`"message":"done"`, "event: template\ndata: {\"name\":\"app\"",
	} {
		if r.code != http.StatusOK || !strings.Contains(s, want) {
			t.Fatalf("streamed build lacks %q: %s", want, r)
		}
	}
	c := e.create(key, map[string]any{"template": "app"})
	got := e.sh(key, c.ID, "cat /opt/app/hello /opt/app/copied; echo; test -e /etc/os-release || echo deleted; "+
		"stat -c '%n %u %a' /opt/app/mine /opt/app/suid /opt/app/hello; test /opt/app/hello -ef /opt/app/again && echo linked; ls /opt/old; echo $GREETING; id -u")
	want := "hihi\ndeleted\n/opt/app/mine 1000 644\n/opt/app/suid 0 755\n/opt/app/hello 0 644\nlinked\nc\nhi\n1000\n"
	if got != want {
		t.Fatalf("on the built template:\n%s\nwant\n%s", got, want)
	}
}

// TestTemplateRunStepFails: a step that fails fails the build (400 naming
// spec) with its exit status and last lines, and nothing is stored: a
// failing command, a step that tries to reach the network (the build
// computer has none), steps that try to escape (a device node, a write to
// a host path, the host's processes), and steps over their time, memory
// or disk limits.
func TestTemplateRunStepFails(t *testing.T) {
	dir := t.TempDir()
	e := newEnvIn(t, dir, func(c *computer.Config) { c.Templates = toolsStore(t, dir) })
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("intact"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		run    string
		limits map[string]int
		want   []string
	}{
		{"exit", "echo first line; echo last words >&2; exit 3", nil,
			[]string{"run[0] (echo first line; echo last words >&2; exit 3) failed with exit status 3; its last lines:\nfirst line\nlast words"}},
		{"network", pyStep("import socket; socket.create_connection(('192.0.2.1', 80), timeout=5)"), nil,
			[]string{"failed with exit status 1", "Network is unreachable"}},
		{"dns", pyStep("import socket; socket.getaddrinfo('deb.debian.org', 80)"), nil,
			[]string{"failed with exit status 1", "gaierror"}},
		{"mknod", pyStep("import os; os.mknod('/usr/null', 0o20666, os.makedev(1, 3))"), nil,
			[]string{"failed with exit status 1", "PermissionError: [Errno 1] Operation not permitted"}},
		{"host path", "echo pwned > " + victim, nil,
			[]string{"failed with exit status 2", "Directory nonexistent"}},
		{"host processes", "kill -9 1 && echo killed the agent; ls /proc | grep -c '^[0-9]' ; exit 7", nil,
			[]string{"failed with exit status 7"}},
		{"timeout", "echo sleeping; sleep 30", map[string]int{"timeout_seconds": 1},
			[]string{"ran out of time (run_limits.timeout_seconds 1)", "sleeping"}},
		{"memory", pyStep("b = b'x' * (400 << 20); print(len(b))"), map[string]int{"memory_mb": 64},
			[]string{"ran out of memory (run_limits.memory_mb 64)"}},
		{"disk", pyStep("import os; [os.write(os.open('/usr/f%d' % i, os.O_WRONLY | os.O_CREAT), bytes(1 << 20)) for i in range(64)]"), map[string]int{"disk_mb": 32},
			[]string{"failed with exit status 1", "No space left on device"}},
		{"whiteout name", "echo x > /.wh.usr", nil, []string{`"/.wh.usr": names starting with .wh. mean deletions`}},
	} {
		spec := map[string]any{"base": "tools", "run": []string{c.run}}
		if c.limits != nil {
			spec["run_limits"] = c.limits
		}
		r := e.do(e.admin, "POST", "/v1/templates", map[string]any{"name": "bad", "spec": spec})
		var er apiErr
		r.json(t, &er)
		for _, want := range c.want {
			if r.code != http.StatusBadRequest || er.Error.Param == nil || *er.Error.Param != "spec" || !strings.Contains(er.Error.Message, want) {
				t.Errorf("%s: %s; want 400 (spec) with %q", c.name, r, want)
			}
		}
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "intact" {
		t.Fatalf("the host file: %q, %v", b, err)
	}
	e.do(e.admin, "GET", "/v1/templates/bad", nil).wantError(t, http.StatusNotFound, "not_found")
	for _, c := range []struct {
		spec map[string]any
		want string
	}{
		{map[string]any{"base": "tools", "run": []string{" "}}, "run[0]: give a shell command"},
		{map[string]any{"base": "tools", "run": []string{"true"}, "run_limits": map[string]int{"memory_mb": 1 << 20}}, "run_limits.memory_mb: 1048576 is not between 1 and 16384"},
		{map[string]any{"base": "tools", "run": []string{"true"}, "run_limits": map[string]int{"cpus": 2}}, `unknown field "cpus"`},
	} {
		r := e.do(e.admin, "POST", "/v1/templates", map[string]any{"name": "bad", "spec": c.spec})
		var er apiErr
		r.json(t, &er)
		if r.code != http.StatusBadRequest || !strings.Contains(er.Error.Message, c.want) {
			t.Errorf("%v: %s; want 400 with %q", c.spec, r, c.want)
		}
	}
}
