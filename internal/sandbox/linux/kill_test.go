package linux_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// TestKillStopsAllCode: once Kill returns, no process of the computer
// writes anymore. Writers append to a file in a host directory bound into
// the computer, from a loop in the shell and from a new process per write
// (forks racing the kill), and from a thread of the session's Python
// kernel; the file must not change after Kill. Destroy then frees the rest.
func TestKillStopsAllCode(t *testing.T) {
	d := newDriver(t)
	out := t.TempDir()
	if err := os.Chmod(out, 0o777); err != nil {
		t.Fatal(err)
	}
	sb := newComputer(t, d, func(s *sandbox.Spec) {
		s.Mounts = []sandbox.Mount{{Source: out, Target: "/mnt/out"}}
	})
	ctx := context.Background()
	res, err := sb.Python(ctx, sandbox.PythonRequest{Mode: "session", Timeout: time.Minute, Cells: []sandbox.PythonCell{{Code: `
import threading
def write():
    with open("/mnt/out/python", "a") as f:
        while True:
            f.write("x" * 512)
            f.flush()
threading.Thread(target=write, daemon=True).start()
`}}}, nil)
	if err != nil || res.Status != "ok" {
		t.Fatalf("python writer: %+v %v", res, err)
	}
	mustSucceed(t, sb, `
(while :; do echo x >> /mnt/out/shell; done) >/dev/null 2>&1 &
(while :; do sh -c 'echo y >> /mnt/out/forks'; done) >/dev/null 2>&1 &
`)
	files := []string{"python", "shell", "forks"}
	sizes := func() map[string]int64 {
		m := map[string]int64{}
		for _, f := range files {
			if fi, err := os.Stat(filepath.Join(out, f)); err == nil {
				m[f] = fi.Size()
			}
		}
		return m
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		s := sizes()
		if s["python"] > 0 && s["shell"] > 0 && s["forks"] > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("writers did not start: %v", s)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := sb.Kill(ctx); err != nil {
		t.Fatalf("kill: %v", err)
	}
	atKill := sizes()
	time.Sleep(300 * time.Millisecond)
	if later := sizes(); !equal(atKill, later) {
		t.Fatalf("files changed after Kill returned: %v, then %v", atKill, later)
	}
	if err := sb.Kill(ctx); err != nil {
		t.Fatalf("second kill: %v", err)
	}
	if _, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "true"}, sandbox.ExecIO{}); err == nil {
		t.Fatal("exec in a killed computer succeeded")
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Fatalf("destroy after kill: %v", err)
	}
	if later := sizes(); !equal(atKill, later) {
		t.Fatalf("files changed after Kill returned: %v, then %v", atKill, later)
	}
}

func equal(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
