package jupyter

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cubicle-sandbox/cubicle/internal/config"
	"github.com/cubicle-sandbox/cubicle/internal/testbin"
)

// TestWorkdir: a working directory under an allowed root is mounted at
// its own path with the root's mode; anything else starts in /workspace.
func TestWorkdir(t *testing.T) {
	// Not under /tmp: that is a path of the computer's own.
	base, err := os.MkdirTemp("/var/tmp", "kgw-workdir")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	rw, ro, outside := filepath.Join(base, "rw"), filepath.Join(base, "ro"), filepath.Join(base, "outside")
	for _, d := range []string{rw + "/proj", ro + "/ref", outside, rw + "x"} {
		os.MkdirAll(d, 0o755)
	}
	os.Symlink(outside, rw+"/escape")
	os.WriteFile(rw+"/file", nil, 0o644)
	s := &Server{cfg: Config{MountRoots: config.MountRoots{{Path: rw}, {Path: ro, ReadOnly: true}}}}
	cwd, m := s.workdir(context.Background(), map[string]string{"KERNEL_WORKING_DIR": rw + "/proj/", "PWD": ro})
	if cwd != rw+"/proj" || len(m) != 1 || m[0].Source != rw+"/proj" || m[0].Target != rw+"/proj" || m[0].ReadOnly || m[0].Root != rw {
		t.Fatalf("rw: %q %+v", cwd, m)
	}
	cwd, m = s.workdir(context.Background(), map[string]string{"PWD": ro + "/ref"})
	if cwd != ro+"/ref" || len(m) != 1 || !m[0].ReadOnly {
		t.Fatalf("PWD under ro: %q %+v", cwd, m)
	}
	for name, env := range map[string]map[string]string{
		"outside":  {"KERNEL_WORKING_DIR": outside},
		"symlink":  {"KERNEL_WORKING_DIR": rw + "/escape"},
		"dotdot":   {"KERNEL_WORKING_DIR": rw + "/../outside"},
		"a file":   {"KERNEL_WORKING_DIR": rw + "/file"},
		"missing":  {"KERNEL_WORKING_DIR": rw + "/nope"},
		"relative": {"KERNEL_WORKING_DIR": "proj"},
		"none":     {},
		"prefix":   {"KERNEL_WORKING_DIR": rw + "x"},
	} {
		if cwd, m := s.workdir(context.Background(), env); cwd != "" || m != nil {
			t.Errorf("%s: %q %+v, want /workspace and no mount", name, cwd, m)
		}
	}
	off := &Server{}
	if cwd, m := off.workdir(context.Background(), map[string]string{"KERNEL_WORKING_DIR": rw + "/proj"}); cwd != "" || m != nil {
		t.Fatalf("without roots: %q %+v", cwd, m)
	}
}

// TestWorkdirSwapRace: a tenant with a read-write mount root swaps its
// project directory for a symlink to a host directory outside the root,
// over and over, while kernels are started in that directory. Every
// kernel starts (never a 5xx), in the project or, when the swap won the
// check or the mount, in /workspace; none ever sees the outside directory.
func TestWorkdirSwapRace(t *testing.T) {
	base, err := os.MkdirTemp("/var/tmp", "kgw-race")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	root, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
	for dir, marker := range map[string]string{root + "/proj": "inside", outside: "SECRET"} {
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "marker"), []byte(marker), 0o644)
	}
	if err := os.Symlink(outside, root+"/swap"); err != nil {
		t.Fatal(err)
	}
	e := newRealEnv(t, Config{MountRoots: config.MountRoots{{Path: root}}})
	defer testbin.Repeat(t, func() error {
		unix.Renameat2(unix.AT_FDCWD, root+"/proj", unix.AT_FDCWD, root+"/swap", unix.RENAME_EXCHANGE)
		return nil
	})()
	seen := map[string]int{}
	for i := 0; i < 6; i++ {
		k := startKernel(t, e.url, e.key, map[string]string{"KERNEL_WORKING_DIR": root + "/proj"})
		ws := dialChannels(t, e.url, e.key, k.ID)
		_, msgs := ws.execute("import os\nprint(os.getcwd(), open('marker').read() if os.path.exists('marker') else '-')", false)
		got := strings.TrimSpace(stdout(msgs))
		if got != root+"/proj inside" && got != "/workspace -" {
			t.Fatalf("kernel %d saw %q", i, got)
		}
		seen[got]++
		if r := doReq(t, e.url, "token "+e.key, "DELETE", "/api/kernels/"+k.ID, nil); r.code != http.StatusNoContent {
			t.Fatalf("delete kernel: %s", r)
		}
	}
	t.Logf("kernels: %v", seen)
}
