package template_test

import (
	"archive/tar"
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/cubicle-sandbox/cubicle/internal/template"
)

// hostileImage has two layers with everything an untrusted image may
// hold: whiteouts (a file, a directory), an opaque directory, setuid and
// setgid files, device nodes, a FIFO, symbolic links out of the root, a
// hard link, an absolute and a ./ name, a non-root owner.
func hostileImage(t *testing.T) v1.Image {
	base := layerOf(t,
		dir("etc"), file("etc/passwd", "root:x:0:0:root:/root:/bin/sh", 0o644), file("etc/motd", "old", 0o644),
		dir("opq"), file("opq/old.txt", "old", 0o644),
		dir("keep"), file("keep/a.txt", "a", 0o644),
		dir("gone"), file("gone/x", "x", 0o644),
		dir("bin"), file("bin/tool", "tool", 0o4755), file("bin/gtool", "g", 0o2755), hardlink("bin/tool2", "bin/tool"),
		file("bin/both", "both", 0o6711),
		dir("dev"), ent{name: "dev/null", typ: tar.TypeChar, mode: 0o666}, ent{name: "dev/sda", typ: tar.TypeBlock, mode: 0o660},
		dir("run"), ent{name: "run/fifo", typ: tar.TypeFifo, mode: 0o644},
		symlink("link-out", "../../etc/passwd"), symlink("link-abs", "/etc/shadow"),
		ent{name: "home/user", typ: tar.TypeDir, mode: 0o700, uid: 1000, gid: 1000},
		ent{name: "home/user/notes", typ: tar.TypeReg, mode: 0o600, uid: 1000, gid: 1000, body: "mine"},
		file("usr/bin/python3", "py", 0o755),
		file("/abs.txt", "abs", 0o644), file("./dot/x.txt", "x", 0o644),
		ent{name: "sticky", typ: tar.TypeDir, mode: 0o1777},
	)
	upper := layerOf(t,
		file("etc/.wh.motd", "", 0), file("bin/.wh.gtool", "", 0), file(".wh.gone", "", 0),
		dir("opq"), file("opq/.wh..wh..opq", "", 0), file("opq/new.txt", "new", 0o644),
		file("keep/b.txt", "b", 0o644),
	)
	return imageOf(t, base, upper)
}

var hostileTree = []string{
	"abs.txt file 0644 0:0 abs",
	"bin dir 0755 0:0",
	"bin/both file 0711 0:0 both",
	"bin/tool file 0755 0:0 tool",
	"bin/tool2 file 0755 0:0 tool",
	"dev dir 0755 0:0",
	"dot dir 0755 0:0",
	"dot/x.txt file 0644 0:0 x",
	"etc dir 0755 0:0",
	"etc/passwd file 0644 0:0 root:x:0:0:root:/root:/bin/sh",
	"home dir 0755 0:0",
	"home/user dir 0700 1000:1000",
	"home/user/notes file 0600 1000:1000 mine",
	"keep dir 0755 0:0",
	"keep/a.txt file 0644 0:0 a",
	"keep/b.txt file 0644 0:0 b",
	"link-abs link 0777 0:0 -> /etc/shadow",
	"link-out link 0777 0:0 -> ../../etc/passwd",
	"opq dir 0755 0:0",
	"opq/new.txt file 0644 0:0 new",
	"run dir 0755 0:0",
	"sticky dir 1777 0:0",
	"usr dir 0755 0:0",
	"usr/bin dir 0755 0:0",
	"usr/bin/python3 file 0755 0:0 py",
}

// hostileSize is the bytes of hostileTree's regular files, the hard link once.
const hostileSize = int64(len("abs") + len("both") + len("tool") + len("x") + len("root:x:0:0:root:/root:/bin/sh") +
	len("mine") + len("a") + len("b") + len("new") + len("py"))

// serveRegistry runs a registry on 127.0.0.1 holding img as test/image:v1.
func serveRegistry(t *testing.T, img v1.Image) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(nilLogger())))
	t.Cleanup(srv.Close)
	ref := strings.TrimPrefix(srv.URL, "http://") + "/test/image:v1"
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}
	return ref
}

// TestImportHostileImage imports the same hostile image from each source
// and checks the root exactly: whiteouts and the opaque directory applied,
// setuid/setgid gone, devices and FIFOs skipped, links kept verbatim and
// nothing outside the root touched.
func TestImportHostileImage(t *testing.T) {
	ctx := context.Background()
	img := hostileImage(t)
	cfgName, _ := img.ConfigName()
	layoutDir := writeLayout(t, img)
	sources := []struct {
		name, kind string
		run        func(*template.Store, template.Options) (template.Template, error)
	}{
		{"layout-dir", "oci-layout", func(s *template.Store, o template.Options) (template.Template, error) {
			return s.Import(ctx, layoutDir, o)
		}},
		{"layout-tar", "oci-layout", func(s *template.Store, o template.Options) (template.Template, error) {
			return s.Import(ctx, tarDir(t, layoutDir), o)
		}},
		{"docker-archive", "docker-archive", func(s *template.Store, o template.Options) (template.Template, error) {
			return s.Import(ctx, writeDocker(t, img), o)
		}},
		{"registry", "registry", func(s *template.Store, o template.Options) (template.Template, error) {
			return s.Pull(ctx, serveRegistry(t, img), o)
		}},
	}
	for _, src := range sources {
		t.Run(src.name, func(t *testing.T) {
			s := openStore(t, template.Limits{})
			var events []template.Progress
			tp, err := src.run(s, template.Options{Name: "hostile", Progress: func(p template.Progress) { events = append(events, p) }})
			if err != nil {
				t.Fatal(err)
			}
			root := s.RootDir(tp)
			sameLines(t, "root", listing(t, root), withMountPoints(hostileTree...))
			a, _ := os.Stat(filepath.Join(root, "bin/tool"))
			b, _ := os.Stat(filepath.Join(root, "bin/tool2"))
			if !os.SameFile(a, b) {
				t.Error("bin/tool2 is not a hard link of bin/tool")
			}
			if tp.ID != cfgName.String() || tp.Source.Kind != src.kind || len(tp.Layers) != 2 ||
				tp.Files != int64(len(hostileTree)) || tp.Size != hostileSize ||
				tp.Skipped != (template.Skipped{Devices: 2, FIFOs: 1}) || tp.Python != "/usr/bin/python3" ||
				tp.Defaults.WorkingDir != "/srv" || len(tp.Defaults.Env) != 2 {
				t.Errorf("template %+v", tp)
			}
			if n := len(events); n != 5 || events[0].State != "done" || events[3].Step != "image" || events[4].Step != "root" {
				t.Errorf("progress %+v", events)
			}
			got, err := s.Get(ctx, "hostile")
			if err != nil || got.ID != tp.ID || got.Root != tp.Root {
				t.Errorf("get: %+v, %v", got, err)
			}
			if tmp := entries(t, s, "tmp"); len(tmp) != 0 {
				t.Errorf("tmp/ holds %v after an import", tmp)
			}
		})
	}
}

// TestImportRefusesEscapes: entries that leave the root, write through a
// symbolic link or hard-link outside their layer refuse the import, and
// nothing is written outside the store nor kept in it.
func TestImportRefusesEscapes(t *testing.T) {
	ctx := context.Background()
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o600)
	t.Cleanup(func() { os.Remove("/etc/cubicle-pwned") }) // only there if the protection is broken
	cases := []struct {
		name string
		ents []ent
		want string
	}{
		{"dotdot", []ent{file("../escape", "x", 0o644)}, `path "../escape" leaves the root`},
		{"dotdot-deep", []ent{dir("a"), file("a/../../escape", "x", 0o644)}, "leaves the root"},
		{"dotdot-whiteout", []ent{file("../.wh.escape", "", 0)}, "leaves the root"},
		{"hardlink-dotdot", []ent{hardlink("h", "../../etc/passwd")}, "leaves the root"},
		{"hardlink-absolute", []ent{hardlink("h", "/etc/passwd")}, "not an earlier entry of the same layer"},
		{"hardlink-outside-dir", []ent{symlink("sub", outside), hardlink("h", "sub/secret")}, "not an earlier entry"},
		{"write-through-symlink", []ent{symlink("sub", outside), file("sub/pwned", "x", 0o644)}, `"sub" is a symbolic link`},
		{"write-through-abs-symlink", []ent{symlink("etc", "/etc"), file("etc/cubicle-pwned", "x", 0o644)}, "symbolic link"},
		{"mkdir-through-symlink", []ent{symlink("sub", outside), dir("sub/d")}, "symbolic link"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := openStore(t, template.Limits{})
			_, err := s.Import(ctx, writeLayout(t, imageOf(t, layerOf(t, c.ents...))), template.Options{Name: "bad"})
			if !errors.Is(err, template.ErrUnsafe) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "layer 1/1") {
				t.Fatalf("err %v, want ErrUnsafe with %q", err, c.want)
			}
			for _, sub := range []string{"layers", "roots", "meta", "tmp"} {
				if e := entries(t, s, sub); len(e) != 0 {
					t.Errorf("%s/ holds %v after a refused import", sub, e)
				}
			}
			sameLines(t, "outside", listing(t, outside), []string{"secret file 0600 0:0 s"})
			if _, err := os.Lstat("/etc/cubicle-pwned"); err == nil {
				t.Fatal("/etc/cubicle-pwned was written")
			}
		})
	}
}

// TestImportSymlinkReplacedAcrossLayers: a directory of an upper layer
// replaces a lower layer's symbolic link of the same name (overlay
// semantics), so the upper layer's files land in the root, not behind the
// link.
func TestImportSymlinkReplacedAcrossLayers(t *testing.T) {
	outside := t.TempDir()
	s := openStore(t, template.Limits{})
	img := imageOf(t, layerOf(t, symlink("sub", outside)), layerOf(t, file("sub/pwned", "x", 0o644)))
	tp, err := s.Import(context.Background(), writeLayout(t, img), template.Options{Name: "x"})
	if err != nil {
		t.Fatal(err)
	}
	sameLines(t, "root", listing(t, s.RootDir(tp)), withMountPoints("sub dir 0755 0:0", "sub/pwned file 0644 0:0 x"))
	sameLines(t, "outside", listing(t, outside), nil)
}
