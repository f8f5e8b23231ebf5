package jupyter

import (
	"net/http"
	"strings"
	"testing"
)

// TestKernelStartEnvironment: JPY_PARENT_PID (a client's own pid, which
// makes ipykernel shut down at once) does not reach the kernel; a kernel
// that still exits at start (here an invalid PYTHONHASHSEED) is a 400 that
// says why, not a 500.
func TestKernelStartEnvironment(t *testing.T) {
	e := newRealEnv(t, Config{})
	k := startKernel(t, e.url, e.key, map[string]string{"JPY_PARENT_PID": "4242", "LANG": "C.UTF-8"})
	ws := dialChannels(t, e.url, e.key, k.ID)
	reply, seen := ws.execute("import os\nprint(os.environ.get('JPY_PARENT_PID'), 6*7)", false)
	if reply.status() != "ok" || stdout(seen) != "None 42\n" {
		t.Fatalf("with JPY_PARENT_PID: %s %s", reply.status(), dump(seen))
	}

	r := doReq(t, e.url, "token "+e.key, "POST", "/api/kernels", map[string]any{"name": "python3", "env": map[string]string{"PYTHONHASHSEED": "bogus"}})
	if r.code != http.StatusBadRequest || !strings.Contains(string(r.body), `"reason":"kernel_start_failed"`) ||
		!strings.Contains(string(r.body), "the kernel could not start: it exited while starting (exit status 1): Fatal Python error: ") ||
		!strings.Contains(string(r.body), "PYTHONHASHSEED") {
		t.Fatalf("a kernel that exits at start: %s", r)
	}
}
