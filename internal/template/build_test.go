package template_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/template"
)

// TestBuildDebian builds a minimal Debian with python3-minimal from the apt
// mirror (mmdebstrap; the first build takes about 30 s here, later runs reuse
// the store in the user's cache directory, ~/.cache/cubicle-test) and runs
// its Python in a chroot of the root.
func TestBuildDebian(t *testing.T) {
	ctx := context.Background()
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	s, err := template.Open(filepath.Join(cache, "cubicle-test", "templates"), template.Limits{MaxBytes: 4 << 30, MaxFiles: 500000})
	if err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(t.TempDir(), "debian.json")
	os.WriteFile(spec, []byte(`{"suite": "bookworm", "variant": "minbase", "packages": ["python3-minimal"]}`), 0o600)
	tp, err := s.Build(ctx, spec, false, template.Options{Name: "debian-py", Replace: true})
	if err != nil {
		t.Fatal(err)
	}
	root := s.RootDir(tp)
	if tp.Python != "/usr/bin/python3" || tp.Source.Kind != "build" || tp.Skipped.Devices == 0 {
		t.Fatalf("template %+v", tp)
	}
	if b, err := os.ReadFile(filepath.Join(root, "etc/debian_version")); err != nil || !strings.HasPrefix(string(b), "12.") {
		t.Fatalf("etc/debian_version: %q %v", b, err)
	}
	ents, _ := os.ReadDir(filepath.Join(root, "dev"))
	for _, e := range ents {
		if e.Type()&(os.ModeDevice|os.ModeNamedPipe) != 0 {
			t.Fatalf("dev/%s is %v; device nodes must be skipped", e.Name(), e.Type())
		}
	}
	if fi, err := os.Stat(filepath.Join(root, "usr/bin/su")); err == nil && fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
		t.Fatalf("usr/bin/su is %v: setuid must be stripped", fi.Mode())
	}
	cmd := exec.Command("/usr/bin/python3", "-c", "import sys; print(6*7, sys.version_info[:2] >= (3, 11))")
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
	cmd.Dir, cmd.Env = "/", []string{"PATH=/usr/bin:/bin"}
	out, err := cmd.CombinedOutput()
	if err != nil || string(out) != "42 True\n" {
		t.Fatalf("python3 in the root: %q %v", out, err)
	}
	// The template stays in the cache store: the next run finds its layer
	// and root stored and takes a fraction of a second.
}

// TestReadSpec: defaults are filled in; bad values and unknown keys are
// refused with a message naming them.
func TestReadSpec(t *testing.T) {
	write := func(body string) string {
		p := filepath.Join(t.TempDir(), "spec.json")
		os.WriteFile(p, []byte(body), 0o600)
		return p
	}
	sp, err := template.ReadSpec(write(`{"packages": ["python3-minimal", "libstdc++6"]}`))
	if err != nil || sp.Suite != "bookworm" || sp.Variant != "minbase" || sp.Mirror != "http://deb.debian.org/debian" || len(sp.Packages) != 2 {
		t.Fatalf("%+v %v", sp, err)
	}
	for body, want := range map[string]string{
		`{"suite": "Bookworm"}`:      `suite "Bookworm"`,
		`{"variant": "fat"}`:         `variant "fat"`,
		`{"packages": ["a b"]}`:      `"a b" is not a Debian package name`,
		`{"packages": ["--hook=x"]}`: "is not a Debian package name",
		`{"mirror": "ftp://x"}`:      `mirror "ftp://x"`,
		`{"run": ["curl evil"]}`:     `unknown field "run"`,
		`not json`:                   "invalid character",
	} {
		_, err := template.ReadSpec(write(body))
		if !errors.Is(err, template.ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
}
