package template_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/cubicle-sandbox/cubicle/internal/template"
)

// blobPath is the file of a blob in an OCI layout.
func blobPath(dir string, h v1.Hash) string { return filepath.Join(dir, "blobs", h.Algorithm, h.Hex) }

func gzipped(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

// TestImportRefusesCorruption: a layer whose content is not its digest,
// a truncated layer and a config that is not the manifest's are refused.
func TestImportRefusesCorruption(t *testing.T) {
	ctx := context.Background()
	img := imageOf(t, layerOf(t, file("a", "a", 0o644)), layerOf(t, file("b", "b", 0o644)))
	layers, _ := img.Layers()
	top, _ := layers[1].Digest()
	cfg, _ := img.ConfigName()
	cases := []struct {
		name    string
		corrupt func(dir string)
		want    string
	}{
		{"other-content", func(dir string) {
			os.WriteFile(blobPath(dir, top), gzipped(t, tarOf(t, file("b", "evil", 0o644))), 0o644)
		}, "layer 2/2 (sha256:"},
		{"truncated", func(dir string) {
			b, _ := os.ReadFile(blobPath(dir, top))
			os.WriteFile(blobPath(dir, top), b[:len(b)/2], 0o644)
		}, "corrupted or truncated"},
		{"config", func(dir string) {
			b, _ := os.ReadFile(blobPath(dir, cfg))
			os.WriteFile(blobPath(dir, cfg), bytes.Replace(b, []byte("/srv"), []byte("/tmp"), 1), 0o644)
		}, "but its manifest says"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := writeLayout(t, img)
			c.corrupt(dir)
			s := openStore(t, template.Limits{})
			_, err := s.Import(ctx, dir, template.Options{Name: "c"})
			if !errors.Is(err, template.ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want ErrCorrupt with %q", err, c.want)
			}
			if c.name == "other-content" && !strings.Contains(err.Error(), "not the one the image names") {
				t.Errorf("err %v does not say the digest differs", err)
			}
			if e := entries(t, s, "meta"); len(e) != 0 {
				t.Errorf("meta/ %v after a refused import", e)
			}
			if e := entries(t, s, "layers"); len(e) > 1 { // the intact lower layer may stay, until GC
				t.Errorf("layers/ %v after a refused import", e)
			}
		})
	}
}

// TestImportLimits: template.max_bytes and template.max_files stop an
// import with an error naming the key, counting layers already stored too.
func TestImportLimits(t *testing.T) {
	ctx := context.Background()
	big := imageOf(t, layerOf(t, file("big", strings.Repeat("x", 2<<20), 0o644)))
	many := make([]ent, 20)
	for i := range many {
		many[i] = file("f"+string(rune('a'+i)), "x", 0o644)
	}
	s := openStore(t, template.Limits{MaxBytes: 1 << 20, MaxFiles: 10})
	_, err := s.Import(ctx, writeLayout(t, big), template.Options{Name: "big"})
	if !errors.Is(err, template.ErrLimit) || !strings.Contains(err.Error(), "template.max_bytes (1048576 bytes)") {
		t.Fatalf("big: %v", err)
	}
	manyImg := imageOf(t, layerOf(t, many...))
	_, err = s.Import(ctx, writeLayout(t, manyImg), template.Options{Name: "many"})
	if !errors.Is(err, template.ErrLimit) || !strings.Contains(err.Error(), "template.max_files (10)") {
		t.Fatalf("many: %v", err)
	}
	for _, sub := range []string{"layers", "roots", "meta", "tmp"} {
		if e := entries(t, s, sub); len(e) != 0 {
			t.Errorf("%s/ holds %v after refused imports", sub, e)
		}
	}
	// The same layer, stored under larger limits, still counts.
	roomy, err := template.Open(s.Dir(), template.Limits{MaxBytes: 1 << 30, MaxFiles: 100})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := roomy.Import(ctx, writeLayout(t, manyImg), template.Options{Name: "many"}); err != nil {
		t.Fatal(err)
	}
	_, err = s.Import(ctx, writeDocker(t, manyImg), template.Options{Name: "many2"})
	if !errors.Is(err, template.ErrLimit) || !strings.Contains(err.Error(), "template.max_files") {
		t.Fatalf("stored layer over the limit: %v", err)
	}
}

// TestDedupAndGC: two images sharing a layer store it once, and their
// roots share its files' inodes; removing templates collects what no
// template uses any more.
func TestDedupAndGC(t *testing.T) {
	ctx := context.Background()
	base := layerOf(t, dir("usr"), file("usr/big", strings.Repeat("b", 4096), 0o644))
	a := imageOf(t, base, layerOf(t, file("a", "a", 0o644)))
	b := imageOf(t, base, layerOf(t, file("b", "b", 0o644)))
	s := openStore(t, template.Limits{})
	ta, err := s.Import(ctx, writeLayout(t, a), template.Options{Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	record := func(p template.Progress) { states = append(states, p.Step+":"+p.State) }
	tb, err := s.Import(ctx, writeDocker(t, b), template.Options{Name: "b", Progress: record})
	if err != nil {
		t.Fatal(err)
	}
	sameLines(t, "b's steps", states, []string{"layer:present", "layer:done", "image:writing", "image:done", "root:done"})
	if n := len(entries(t, s, "layers")); n != 3 {
		t.Fatalf("%d layers stored, want 3", n)
	}
	fa, _ := os.Stat(filepath.Join(s.RootDir(ta), "usr/big"))
	fb, _ := os.Stat(filepath.Join(s.RootDir(tb), "usr/big"))
	if !os.SameFile(fa, fb) {
		t.Fatal("the shared layer's file is stored twice")
	}
	states = nil
	if _, err := s.Import(ctx, writeLayout(t, a), template.Options{Name: "a2", Progress: record}); err != nil {
		t.Fatal(err)
	}
	sameLines(t, "a2's steps", states, []string{"layer:present", "layer:present", "root:present"})
	if n := len(entries(t, s, "roots")); n != 2 {
		t.Fatalf("%d roots, want 2", n)
	}
	steps := []struct {
		rm             string
		layers, roots  int
		removedL, remR int
	}{{"a", 3, 2, 0, 0}, {"a2", 2, 1, 1, 1}, {"b", 0, 0, 2, 1}}
	for _, st := range steps {
		rep, err := s.Remove(ctx, st.rm)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Layers != st.removedL || rep.Roots != st.remR || len(entries(t, s, "layers")) != st.layers || len(entries(t, s, "roots")) != st.roots {
			t.Fatalf("after rm %s: report %+v, layers %v, roots %v", st.rm, rep, entries(t, s, "layers"), entries(t, s, "roots"))
		}
	}
	if ts, err := s.List(ctx); err != nil || len(ts) != 0 {
		t.Fatalf("list after removing all: %v, %v", ts, err)
	}
	if _, err := s.Remove(ctx, "a"); !errors.Is(err, template.ErrNotFound) {
		t.Fatalf("second rm: %v", err)
	}
}

// TestConcurrentImports: two imports of the same image at once unpack
// each layer once; both templates are stored.
func TestConcurrentImports(t *testing.T) {
	ctx := context.Background()
	img := imageOf(t, layerOf(t, file("a", strings.Repeat("a", 1<<20), 0o644)), layerOf(t, file("b", "b", 0o644)))
	dir := writeLayout(t, img)
	s := openStore(t, template.Limits{})
	var mu sync.Mutex
	done := 0
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, n := range []string{"x", "y"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.Import(ctx, dir, template.Options{Name: n, Progress: func(p template.Progress) {
				if p.State == "done" {
					mu.Lock()
					done++
					mu.Unlock()
				}
			}})
		}()
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	if done != 4 { // two layers, one root and its image, each made once
		t.Fatalf("%d steps done, want 4 (each layer, the root and its image once)", done)
	}
	if ts, _ := s.List(ctx); len(ts) != 2 || ts[0].Root != ts[1].Root {
		t.Fatalf("templates %+v", ts)
	}
}

// TestNames: bad names and existing templates are refused; --replace replaces.
func TestNames(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, template.Limits{})
	dir := writeLayout(t, imageOf(t, layerOf(t, file("a", "a", 0o644))))
	for _, n := range []string{"", "Upper", "host", "-x", "a/b", "../x", strings.Repeat("a", 65)} {
		if _, err := s.Import(ctx, dir, template.Options{Name: n}); !errors.Is(err, template.ErrInvalid) {
			t.Errorf("name %q: %v", n, err)
		}
	}
	if _, err := s.Import(ctx, dir, template.Options{Name: "py3.12_x-y"}); err != nil {
		t.Fatal(err)
	}
	_, err := s.Import(ctx, dir, template.Options{Name: "py3.12_x-y"})
	if !errors.Is(err, template.ErrExists) || !strings.Contains(err.Error(), "--replace") {
		t.Fatalf("existing: %v", err)
	}
	other := writeLayout(t, imageOf(t, layerOf(t, file("b", "b", 0o644))))
	tp, err := s.Import(ctx, other, template.Options{Name: "py3.12_x-y", Replace: true})
	if err != nil {
		t.Fatal(err)
	}
	sameLines(t, "replaced root", listing(t, s.RootDir(tp)), withMountPoints("b file 0644 0:0 b"))
	if _, err := s.Get(ctx, "nope"); !errors.Is(err, template.ErrNotFound) {
		t.Fatalf("get nope: %v", err)
	}
}

// TestImageMountPoints: every root gets the mount points a computer needs
// (links where they belong replaced, the trust store resolved inside the
// root, the image's own files kept) and an EROFS image, made again when
// missing; an image whose /etc or /etc/passwd cannot be one is refused.
func TestImageMountPoints(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, template.Limits{})
	img := imageOf(t, layerOf(t,
		dir("etc"), file("etc/hosts", "mine", 0o644), symlink("etc/resolv.conf", "/run/systemd/resolve/stub-resolv.conf"),
		symlink("tmp", "/var/tmp"), dir("usr"), dir("usr/share"), file("usr/share/bundle.pem", "PEM", 0o644),
		dir("etc/ssl"), dir("etc/ssl/certs"), symlink("etc/ssl/certs/ca-certificates.crt", "/usr/share/bundle.pem"),
	))
	tp, err := s.Import(ctx, writeLayout(t, img), template.Options{Name: "m"})
	if err != nil {
		t.Fatal(err)
	}
	sameLines(t, "root", listing(t, s.RootDir(tp)), withMountPoints(
		"etc dir 0755 0:0", "etc/hosts file 0644 0:0 mine", "etc/resolv.conf file 0644 0:0 ",
		"etc/ssl dir 0755 0:0", "etc/ssl/certs dir 0755 0:0", "etc/ssl/certs/ca-certificates.crt file 0644 0:0 PEM",
		"tmp dir 0755 0:0", "usr dir 0755 0:0", "usr/share dir 0755 0:0", "usr/share/bundle.pem file 0644 0:0 PEM"))
	path, err := s.Image(ctx, tp)
	if err != nil {
		t.Fatal(err)
	}
	erofsMagic := func() uint32 {
		b, err := os.ReadFile(path)
		if err != nil || len(b) < 1028 {
			t.Fatalf("image %s: %v", path, err)
		}
		return binary.LittleEndian.Uint32(b[1024:])
	}
	if m := erofsMagic(); m != 0xE0F5E1E2 {
		t.Fatalf("%s has magic %#x, not EROFS's", path, m)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if again, err := s.Image(ctx, tp); err != nil || again != path || erofsMagic() != 0xE0F5E1E2 {
		t.Fatalf("image made again: %s, %v", again, err)
	}

	for name, l := range map[string]v1.Layer{
		"etc link":   layerOf(t, symlink("etc", "/etc")),
		"passwd dir": layerOf(t, dir("etc"), dir("etc/passwd")),
	} {
		_, err := s.Import(ctx, writeLayout(t, imageOf(t, l)), template.Options{Name: "bad"})
		if err == nil || !strings.Contains(err.Error(), "a computer needs") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestKernel: a template's Python has a kernel when ipykernel's launcher
// is in its packages (Debian's dist-packages, a versioned site-packages),
// looked up inside the root: a link to the host's own packages (which
// have ipykernel here) does not count.
func TestKernel(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, template.Limits{})
	py := file("usr/bin/python3", "py", 0o755)
	for name, c := range map[string]struct {
		l    v1.Layer
		want bool
	}{
		"debian":   {layerOf(t, py, file("usr/lib/python3/dist-packages/ipykernel_launcher.py", "", 0o644)), true},
		"local":    {layerOf(t, py, file("usr/local/lib/python3.12/site-packages/ipykernel_launcher.py", "", 0o644)), true},
		"none":     {layerOf(t, py, file("usr/lib/python3/dist-packages/other.py", "", 0o644)), false},
		"hostlink": {layerOf(t, py, dir("usr/lib"), symlink("usr/lib/python3", "/usr/lib/python3")), false},
	} {
		tp, err := s.Import(ctx, writeLayout(t, imageOf(t, c.l)), template.Options{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		if tp.Python != "/usr/bin/python3" || tp.Kernel != c.want {
			t.Errorf("%s: python %q kernel %v, want kernel %v", name, tp.Python, tp.Kernel, c.want)
		}
	}
}
