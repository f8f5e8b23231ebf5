package linux_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/template/templatetest"
)

// templateImage makes a small template image (templatetest.MiniRoot) with
// a setuid-root copy of id at /usr/bin/suid-id.
func templateImage(t *testing.T) string {
	t.Helper()
	root := templatetest.MiniRoot(t, t.TempDir(), templatetest.Programs...)
	suid := filepath.Join(root, "usr/bin/suid-id")
	b, err := os.ReadFile(filepath.Join(root, "usr/bin/id"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(suid, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(suid, 0o4755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(root, "home/user")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(home, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	return templatetest.Image(t, root)
}

// loopsOf counts the loop devices whose backing file is img.
func loopsOf(t *testing.T, img string) int {
	t.Helper()
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil && strings.HasPrefix(strings.TrimSpace(string(b)), img) {
			n++
		}
	}
	return n
}

// A computer made from a template runs the template's programs on the
// template's root, read-only and nosuid, with its own /workspace, /tmp,
// /dev, /proc and /etc files, and nothing of the host's runtime.
func TestTemplateRoot(t *testing.T) {
	img := templateImage(t)
	d := newDriver(t)
	spec := func(s *sandbox.Spec) { s.Root = sandbox.Root{Template: "mini", Image: img} }
	sb := newComputer(t, d, spec)

	if got := mustSucceed(t, sb, "cat /etc/os-release"); got != templatetest.OSRelease {
		t.Errorf("/etc/os-release = %q, want the template's", got)
	}
	if r := run(t, sb, "test -e /usr/bin/python3 || test -e /etc/ssl/certs/ca-certificates.crt && echo host"); r.Stdout != "" {
		t.Errorf("the host's runtime is visible: %q", r.Stdout)
	}
	if got := mustSucceed(t, sb, "id -u; /usr/bin/suid-id -u; cat /etc/hostname; head -2 /etc/passwd"); got !=
		"1000\n1000\ncomputer\nroot:x:0:0:root:/root:/usr/sbin/nologin\nuser:x:1000:1000:sandbox user:/workspace:/bin/bash\n" {
		t.Errorf("identity, setuid and /etc = %q", got)
	}
	for _, p := range []string{"/x", "/usr/bin/x", "/etc/x", "/etc/passwd"} {
		if r := run(t, sb, "touch "+p); r.ExitCode == 0 || !strings.Contains(r.Stderr, "Read-only") && !strings.Contains(r.Stderr, "Permission denied") {
			t.Errorf("touch %s: exit %d, %q; want a read-only file system", p, r.ExitCode, r.Stderr)
		}
	}
	mustSucceed(t, sb, "touch /workspace/a /tmp/b /dev/shm/c && ls /proc/self/fd >/dev/null")
	// The image is idmapped to the computer: its uid 1000 is the sandbox
	// user's, root stays root.
	if got := mustSucceed(t, sb, "stat -c %u:%g /home/user /usr/bin/id"); got != "1000:1000\n0:0\n" {
		t.Errorf("owners in the image = %q, want 1000:1000 and 0:0", got)
	}
	info := mustSucceed(t, sb, "cat /proc/self/mountinfo")
	for _, leak := range []string{filepath.Dir(img), "/dev/loop", "/dev/vd", "erofs /dev"} {
		if strings.Contains(info, leak) {
			t.Errorf("mountinfo names %q:\n%s", leak, info)
		}
	}
	if !strings.Contains(info, " / / ro,nosuid,nodev") || !strings.Contains(info, "erofs runtime") {
		t.Errorf("the root is not the template's image, read-only, nosuid, nodev, named runtime:\n%s", info)
	}
	_, err := sb.Python(context.Background(), sandbox.PythonRequest{Cells: []sandbox.PythonCell{{Code: "1"}}}, nil)
	if err == nil || !strings.Contains(err.Error(), "template has no Python") {
		t.Errorf("python on a template without one: %v", err)
	}

	// A second computer of the template shares the first one's device.
	sb2 := newComputer(t, d, spec)
	mustSucceed(t, sb2, "cat /etc/os-release")
	if n := loopsOf(t, img); n != 1 {
		t.Errorf("%d loop devices back the image for two computers, want 1", n)
	}
	// Once the template's image is removed and its computers are gone,
	// its device is freed.
	if err := os.Remove(img); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range []sandbox.Sandbox{sb, sb2} {
		if err := c.Kill(ctx); err != nil {
			t.Fatal(err)
		}
		if err := c.Destroy(ctx); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for loopsOf(t, img) != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := loopsOf(t, img); n != 0 {
		t.Errorf("%d loop devices still back the removed image", n)
	}
}

// A template image that is not one fails Create with a clear error.
func TestTemplateRootBadImage(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "root.erofs")
	if err := os.WriteFile(bad, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := sandbox.DefaultSpec()
	spec.Root = sandbox.Root{Template: "bad", Image: bad}
	_, err := newDriver(t).Create(context.Background(), spec)
	if err == nil || !strings.Contains(err.Error(), "template image") {
		t.Fatalf("Create on a bad image: %v", err)
	}
	var missing = sandbox.DefaultSpec()
	missing.Root = sandbox.Root{Template: "gone", Image: bad + ".gone"}
	if _, err := newDriver(t).Create(context.Background(), missing); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Create on a missing image: %v", err)
	}
}
