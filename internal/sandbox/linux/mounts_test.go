package linux_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/linux"
	"github.com/cubicle-sandbox/cubicle/internal/testbin"
)

// mountRoot makes a tenant-writable root holding proj/marker ("inside")
// and, outside the root, a directory whose marker says "SECRET".
func mountRoot(t *testing.T) (root, outside string) {
	t.Helper()
	base := t.TempDir()
	root, outside = filepath.Join(base, "root"), filepath.Join(base, "outside")
	for dir, marker := range map[string]string{filepath.Join(root, "proj"): "inside", outside: "SECRET"} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "marker"), []byte(marker), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root, outside
}

// createWithMount starts a computer with m at /mnt/work, destroyed when the
// test ends; the error is Create's.
func createWithMount(t *testing.T, d *linux.Driver, m sandbox.Mount) (sandbox.Sandbox, error) {
	t.Helper()
	spec := sandbox.DefaultSpec()
	spec.DiskBytes = 64 << 20
	m.Target = "/mnt/work"
	spec.Mounts = []sandbox.Mount{m}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sb, err := d.Create(ctx, spec)
	if err == nil {
		t.Cleanup(func() { sb.Destroy(context.Background()) })
	}
	return sb, err
}

// TestMountSwapRace: while the tenant's root has its working directory
// swapped for a symlink to a directory outside the root, over and over
// (an atomic RENAME_EXCHANGE, as a tenant's kernel with the root mounted
// read-write can do), computers are created with that working directory.
// Each either mounts the directory itself or is refused with
// ErrMountSource; the outside directory is never what gets mounted.
func TestMountSwapRace(t *testing.T) {
	d := newDriver(t)
	root, outside := mountRoot(t)
	if err := os.Symlink(outside, filepath.Join(root, "swap")); err != nil {
		t.Fatal(err)
	}
	defer testbin.Repeat(t, func() error {
		return unix.Renameat2(unix.AT_FDCWD, filepath.Join(root, "proj"), unix.AT_FDCWD,
			filepath.Join(root, "swap"), unix.RENAME_EXCHANGE)
	})()
	mounted, refused := 0, 0
	for i := 0; i < 40; i++ {
		sb, err := createWithMount(t, d, sandbox.Mount{Root: root, Source: filepath.Join(root, "proj")})
		if errors.Is(err, sandbox.ErrMountSource) {
			refused++
			continue
		}
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		got := mustSucceed(t, sb, "cat /mnt/work/marker")
		if got != "inside" {
			t.Fatalf("try %d mounted the directory outside the root (marker %q)", i, got)
		}
		mounted++
		sb.Destroy(context.Background())
	}
	t.Logf("%d mounted, %d refused", mounted, refused)
	if mounted == 0 {
		t.Fatalf("no computer mounted the working directory (%d refused)", refused)
	}
}

// TestMountBeneathRoot: a source beneath a root is reached without
// symlinks: a symlink as the last component or as an intermediate one
// (even one pointing inside the root) is refused with ErrMountSource, a
// source outside its root is an invalid spec, and a plain directory
// mounts read-write.
func TestMountBeneathRoot(t *testing.T) {
	d := newDriver(t)
	root, outside := mountRoot(t)
	for name, target := range map[string]string{"escape": outside, "inner": filepath.Join(root, "proj")} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, src := range []string{"escape", "inner", "escape/sub", "missing", "proj/marker"} {
		_, err := createWithMount(t, d, sandbox.Mount{Root: root, Source: filepath.Join(root, src)})
		if !errors.Is(err, sandbox.ErrMountSource) {
			t.Errorf("%s: %v, want ErrMountSource", src, err)
		}
	}
	if _, err := createWithMount(t, d, sandbox.Mount{Root: root, Source: outside}); !errors.Is(err, sandbox.ErrInvalidSpec) {
		t.Errorf("outside the root: %v, want ErrInvalidSpec", err)
	}
	if err := os.Chmod(filepath.Join(root, "proj"), 0o777); err != nil {
		t.Fatal(err)
	}
	for _, ro := range []bool{false, true} {
		sb, err := createWithMount(t, d, sandbox.Mount{Root: root, Source: filepath.Join(root, "proj"), ReadOnly: ro})
		if err != nil {
			t.Fatal(err)
		}
		r := run(t, sb, "cat /mnt/work/marker && touch /mnt/work/new")
		if r.Stdout != "inside" || (r.ExitCode == 0) == ro || (ro && !strings.Contains(r.Stderr, "Read-only")) {
			t.Fatalf("read-only %v: %+v", ro, r)
		}
	}
	// The mount is idmapped to the computer's user namespace: what the
	// sandbox user (uid 1000 inside) creates belongs to uid 1000 on the
	// host too, not to the computer's own host uid.
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(root, "proj", "new"), &st); err != nil || st.Uid != 1000 || st.Gid != 1000 {
		t.Fatalf("the file the computer created: %v, owned by %d:%d on the host, want 1000:1000", err, st.Uid, st.Gid)
	}
}
