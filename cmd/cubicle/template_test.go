package main

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/store"
	"github.com/cubicle-sandbox/cubicle/internal/store/sqlite"
	"github.com/cubicle-sandbox/cubicle/internal/template"
	"github.com/cubicle-sandbox/cubicle/internal/template/templatetest"
)

// testLayout writes an OCI layout of one layer: a setuid usr/bin/python3
// and a device node.
func testLayout(t *testing.T) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "usr/bin/python3", Typeflag: tar.TypeReg, Mode: 0o4755, Size: 2})
	tw.Write([]byte("py"))
	tw.WriteHeader(&tar.Header{Name: "dev/null", Typeflag: tar.TypeChar, Mode: 0o666, Devmajor: 1, Devminor: 3})
	tw.Close()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		t.Fatal(err)
	}
	return templatetest.Layout(t, img)
}

// TestTemplateCLI: import (progress on stderr, --json result on stdout),
// list, inspect, rm, and the errors of each verb.
func TestTemplateCLI(t *testing.T) {
	data, archive := t.TempDir(), testLayout(t)
	r := cli(t, "template", "import", archive, "--name", "py", "--data", data, "--json")
	if r.code != 0 || !strings.Contains(r.stderr, "layer 1/1 ") || !strings.Contains(r.stderr, "unpacked") {
		t.Fatalf("import: %+v", r)
	}
	var got struct {
		Name, ID, Python string
		RootDir          string `json:"root_dir"`
		Skipped          struct{ Devices int }
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || got.Name != "py" || got.Python != "/usr/bin/python3" || got.Skipped.Devices != 1 {
		t.Fatalf("import --json: %v %+v\n%s", err, got, r.stdout)
	}
	if fi, err := os.Stat(filepath.Join(got.RootDir, "usr/bin/python3")); err != nil || fi.Mode()&os.ModeSetuid != 0 || fi.Mode().Perm() != 0o755 {
		t.Fatalf("python3 in the root: %v %v", fi.Mode(), err)
	}
	r = cli(t, "template", "import", archive, "--name", "py", "--data", data)
	if r.code != 1 || !strings.Contains(r.stderr, `template "py" exists`) {
		t.Fatalf("import again: %+v", r)
	}
	r = cli(t, "template", "list", "--data", data)
	if r.code != 0 || !strings.Contains(r.stdout, "py ") || !strings.Contains(r.stdout, "/usr/bin/python3") {
		t.Fatalf("list: %+v", r)
	}
	r = cli(t, "template", "inspect", "py", "--data", data)
	if r.code != 0 || !strings.Contains(r.stdout, "root:        "+got.RootDir) || !strings.Contains(r.stdout, "1 device nodes") {
		t.Fatalf("inspect: %+v", r)
	}
	r = cli(t, "template", "rm", "--json", "py", "--data", data)
	if r.code != 0 || !strings.Contains(r.stdout, `"layers": 1`) {
		t.Fatalf("rm: %+v", r)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"import", archive}, 2, "--name is required"},
		{[]string{"import", "--name", "x"}, 2, "give exactly one ARCHIVE"},
		{[]string{"import", archive, "--name", "Bad/Name"}, 1, `template name "Bad/Name"`},
		{[]string{"import", filepath.Join(data, "nope.tar"), "--name", "x"}, 1, "no such file"},
		{[]string{"pull", "not a ref", "--name", "x"}, 1, "is not an image reference"},
		{[]string{"inspect", "py"}, 1, `no template "py"`},
		{[]string{"rm", "py"}, 1, `no template "py"`},
		{[]string{"frob"}, 2, "unknown verb"},
	} {
		r := cli(t, append(append([]string{"template"}, c.args...), "--data", data)...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%q: code %d, stderr %q; want %d and %q", c.args, r.code, r.stderr, c.code, c.want)
		}
	}
	for _, verb := range []string{"import", "pull", "build", "list", "inspect", "rm"} {
		if r := cli(t, "template", verb, "--help"); r.code != 0 || !strings.Contains(r.stdout, "Usage: cubicle template "+verb) || !strings.Contains(r.stdout, "Example:\n  ") {
			t.Errorf("%s --help: %+v", verb, r)
		}
	}
}

// TestTemplateRmInUse: a template that a running or a paused computer (in
// the data directory's database) was made from is kept unless --force,
// naming them.
func TestTemplateRmInUse(t *testing.T) {
	data := t.TempDir()
	if r := cli(t, "template", "import", testLayout(t), "--name", "py", "--data", data); r.code != 0 {
		t.Fatalf("import: %+v", r)
	}
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(data, "cubicle.db"))
	if err != nil {
		t.Fatal(err)
	}
	gov := governance.New(st)
	if _, err := gov.Bootstrap(ctx, "cub_test_admin_rm_0001"); err != nil {
		t.Fatal(err)
	}
	p, err := gov.Authenticate(ctx, "cub_test_admin_rm_0001")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := st.Computers().Create(ctx, store.Computer{ID: "cmp_000000000000000000000001", OrgID: p.Org.ID, KeyID: p.Key.ID,
		Status: store.StatusReady, CreatedAt: now, ReadyAt: &now, ExpiresAt: now.Add(time.Hour),
		Limits: json.RawMessage(`{"memory_mb":256,"template":"py"}`), Metadata: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if err := st.Computers().Create(ctx, store.Computer{ID: "cmp_000000000000000000000002", OrgID: p.Org.ID, KeyID: p.Key.ID,
		Status: store.StatusReady, CreatedAt: now, ReadyAt: &now, ExpiresAt: now.Add(time.Hour),
		Limits: json.RawMessage(`{"memory_mb":256,"template":"py"}`), Metadata: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if err := st.Computers().Pause(ctx, store.Stop{ComputerID: "cmp_000000000000000000000002", At: now, Reason: "paused"}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	r := cli(t, "template", "rm", "py", "--data", data)
	if r.code != 1 || !strings.Contains(r.stderr, "computers made from py exist: cmp_000000000000000000000001, cmp_000000000000000000000002 (paused)") ||
		!strings.Contains(r.stderr, "--force") {
		t.Fatalf("rm of a template in use: %+v", r)
	}
	if r := cli(t, "template", "rm", "py", "--force", "--data", data); r.code != 0 || !strings.Contains(r.stdout, "removed py") {
		t.Fatalf("rm --force: %+v", r)
	}
}

// TestTemplateBuildRun: 'cubicle template build' runs a spec's run steps
// in build computers of the data directory, printing each step's output
// as it comes; the step's files are in the template's root, and a failing
// step fails the build with its exit status and last lines.
func TestTemplateBuildRun(t *testing.T) {
	data := t.TempDir()
	st, err := template.Open(filepath.Join(data, "templates"), template.Limits{MaxBytes: 1 << 30, MaxFiles: 100000})
	if err != nil {
		t.Fatal(err)
	}
	templatetest.Import(t, st, "mini", templatetest.MiniRoot(t, t.TempDir(), templatetest.Programs...), "PATH=/usr/bin:/bin")
	spec := filepath.Join(t.TempDir(), "app.json")
	if err := os.WriteFile(spec, []byte(`{"base": "mini", "run": ["echo made by $(id -u) > /made.txt && cat /made.txt"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	r := cli(t, "template", "build", spec, "--name", "app", "--data", data, "--json")
	if r.code != 0 || !strings.Contains(r.stderr, "run 1/1: $ echo made by") || !strings.Contains(r.stderr, "run 1/1: made by 0\n") ||
		!strings.Contains(r.stderr, "run 1/1: done in ") {
		t.Fatalf("build: %+v", r)
	}
	var got struct {
		RootDir string `json:"root_dir"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(got.RootDir, "made.txt")); err != nil || string(b) != "made by 0\n" {
		t.Fatalf("made.txt in the root: %q, %v", b, err)
	}
	if err := os.WriteFile(spec, []byte(`{"base": "mini", "run": ["echo trying; exit 4"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	r = cli(t, "template", "build", spec, "--name", "bad", "--data", data)
	if r.code != 1 || !strings.Contains(r.stderr, "run[0] (echo trying; exit 4) failed with exit status 4; its last lines:\ntrying\n") {
		t.Fatalf("failing build: %+v", r)
	}
}
