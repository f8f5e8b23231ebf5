package kgw

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/config"
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
	if cwd != rw+"/proj" || len(m) != 1 || m[0].Source != rw+"/proj" || m[0].Target != rw+"/proj" || m[0].ReadOnly {
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
