package template_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
		`{"runs": ["curl evil"]}`:    `unknown field "runs"`,
		`{"run": [" "]}`:             `run[0]: give a shell command`,
		`{"run": ["true"], "run_limits": {"timeout_seconds": 99999}}`: `run_limits.timeout_seconds: 99999 is not between 1 and 3600`,
		`{"run": ["true"], "run_limits": {"disk_mb": -1}}`:            `run_limits.disk_mb: -1`,
		`not json`: "invalid character",
	} {
		_, err := template.ReadSpec(write(body))
		if !errors.Is(err, template.ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
}

// TestBuildOnBase: a spec on a base template adds a layer of files (owned
// by root, setuid dropped, links kept) and environment variables to the
// base's layers and defaults; no mmdebstrap runs.
func TestBuildOnBase(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, template.Limits{})
	base, err := s.Import(ctx, writeLayout(t, imageOf(t, layerOf(t, dir("usr"), file("usr/base.txt", "base", 0o644)))),
		template.Options{Name: "base"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "app/sub"), 0o755)
	os.WriteFile(filepath.Join(dir, "app/run.sh"), []byte("#!/bin/sh\necho run\n"), 0o755)
	os.Chmod(filepath.Join(dir, "app/run.sh"), 0o4755|os.ModeSetuid)
	os.WriteFile(filepath.Join(dir, "app/sub/data.txt"), []byte("data"), 0o600)
	os.Symlink("run.sh", filepath.Join(dir, "app/start"))
	os.WriteFile(filepath.Join(dir, "spec.json"), []byte(`{"base": "base", "files": [{"src": "app", "dst": "/opt/app/"}],
		"env": ["APP=1", "LANG=C"]}`), 0o600)
	var steps []string
	tp, err := s.Build(ctx, filepath.Join(dir, "spec.json"), false, template.Options{Name: "app",
		Progress: func(p template.Progress) { steps = append(steps, p.Step+":"+p.State) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(tp.Layers) != 2 || tp.Layers[0] != base.Layers[0] || tp.Source.Kind != "build" || slices.Contains(steps, "build:running") {
		t.Fatalf("template %+v, steps %v", tp, steps)
	}
	if !slices.Equal(tp.Defaults.Env, []string{"PATH=/usr/local/bin:/usr/bin:/bin", "APP=1", "LANG=C"}) || tp.Defaults.WorkingDir != "/srv" {
		t.Fatalf("defaults %+v", tp.Defaults)
	}
	sameLines(t, "root", listing(t, s.RootDir(tp)), withMountPoints(
		"opt dir 0755 0:0", "opt/app dir 0755 0:0", "opt/app/run.sh file 0755 0:0 #!/bin/sh\necho run",
		"opt/app/start link 0777 0:0 -> run.sh", "opt/app/sub dir 0755 0:0", "opt/app/sub/data.txt file 0600 0:0 data",
		"usr dir 0755 0:0", "usr/base.txt file 0644 0:0 base"))

	for body, want := range map[string]string{
		`{"base": "nope"}`:                                          `base: no template "nope"`,
		`{"base": "base", "packages": ["curl"]}`:                    "packages come with a Debian release, as files, or from a run step with a network_policy",
		`{"base": "base", "run": ["true"]}`:                         "run steps need a build computer",
		`{"base": "base", "files": [{"src": "gone", "dst": "/x"}]}`: "files[0]: lstat",
		`{"base": "base", "files": [{"src": "app", "dst": "x"}]}`:   "an absolute path in the root",
		`{"base": "base", "env": ["1X=2"]}`:                         `env: "1X=2" is not NAME=value`,
		`{"base": "base", "run": ["true"], "network_policy": {"type": "allowlist", "allowed_domains": ["a.test"]}}`: "build this spec over the API (POST /v1/templates)",
		`{"base": "base", "run": ["true"], "network_policy": {"type": "allowlist"}}`:                                "an allowlist needs at least one domain",
		`{"base": "base", "network_policy": {"type": "allowlist", "allowed_domains": ["a.test"]}}`:                  "network_policy is the run steps' network: give run steps",
	} {
		os.WriteFile(filepath.Join(dir, "bad.json"), []byte(body), 0o600)
		if _, err := s.Build(ctx, filepath.Join(dir, "bad.json"), false, template.Options{Name: "bad"}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
}

// TestBuildCancelLeavesNothing: a build whose caller goes away (the
// client of POST /v1/templates hung up) stops with every process it
// started and leaves no scratch behind. Killing mmdebstrap alone left it
// or its apt and dpkg children running for 35 s more, and 180-290 MB of
// /tmp/mmdebstrap.* for good, each time.
func TestBuildCancelLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	s, err := template.Open(dir, template.Limits{MaxBytes: 4 << 30, MaxFiles: 500000})
	if err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(t.TempDir(), "debian.json")
	os.WriteFile(spec, []byte(`{"suite": "bookworm", "variant": "minbase"}`), 0o600)
	scratchBefore, _ := filepath.Glob("/tmp/mmdebstrap.*")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var pgid int
	_, err = s.Build(ctx, spec, false, template.Options{Name: "cut", Progress: func(p template.Progress) {
		if p.Step != "build" || p.State != "running" || pgid != 0 {
			return
		}
		t.Logf("mmdebstrap: %s", p.Message)
		// Once mmdebstrap runs apt in its chroot, note its group and stop.
		if pid := childNamed(os.Getpid(), "mmdebstrap"); pid != 0 && strings.Contains(p.Message, "apt") {
			pgid, _ = syscall.Getpgid(pid)
			cancel()
		}
	}})
	if err == nil || pgid == 0 {
		t.Fatalf("a cancelled build: %v (mmdebstrap's group %d)", err, pgid)
	}
	if pgid == syscall.Getpgrp() {
		t.Fatal("mmdebstrap ran in the test's own process group: it cannot be stopped with its children")
	}
	if err := syscall.Kill(-pgid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("mmdebstrap's process group %d after Build returned: %v, want none left", pgid, err)
		syscall.Kill(-pgid, syscall.SIGKILL)
	}
	scratchAfter, _ := filepath.Glob("/tmp/mmdebstrap.*")
	for _, p := range scratchAfter {
		if !slices.Contains(scratchBefore, p) {
			t.Errorf("%s left in /tmp", p)
			os.RemoveAll(p)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "tmp", "*")); len(left) != 0 {
		t.Errorf("scratch left after a cancelled build: %v", left)
	}
}

// childNamed is the pid of a child of parent whose command is name (0:
// none).
func childNamed(parent int, name string) int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		var pid, ppid int
		var state string
		fmt.Sscanf(s[:open], "%d", &pid)
		fmt.Sscanf(s[end+1:], " %s %d", &state, &ppid)
		if ppid == parent && s[open+1:end] == name {
			return pid
		}
	}
	return 0
}
