package templatetest

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/cubicle-sandbox/cubicle/internal/template"
)

// Programs are what MiniRoot copies unless told otherwise: a shell (and
// /bin/sh, which the agent runs commands with) and a few tools.
var Programs = []string{"/usr/bin/bash", "/usr/bin/dash", "/usr/bin/cat", "/usr/bin/id", "/usr/bin/ls",
	"/usr/bin/touch", "/usr/bin/stat", "/usr/bin/head"}

// OSRelease is the /etc/os-release of a MiniRoot: a computer on it reads
// this, not the host's.
const OSRelease = "ID=cubicle-mini\nNAME=\"Cubicle test template\"\n"

// MiniRoot makes a root directory under dir holding programs (host paths)
// and the libraries ldd says they load, at the same paths, with /bin,
// /lib, /lib64 and /sbin linking into /usr and /usr/bin/sh to dash, and
// returns it.
func MiniRoot(t testing.TB, dir string, programs ...string) string {
	t.Helper()
	root := filepath.Join(dir, "rootfs")
	for _, d := range []string{"usr/bin", "usr/sbin", "usr/lib", "usr/lib64", "etc"} {
		must(t, os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	for _, l := range []string{"bin", "lib", "lib64", "sbin"} {
		must(t, os.Symlink("usr/"+l, filepath.Join(root, l)))
	}
	must(t, os.Symlink("dash", filepath.Join(root, "usr/bin/sh")))
	must(t, os.WriteFile(filepath.Join(root, "etc/os-release"), []byte(OSRelease), 0o644))
	seen := map[string]bool{}
	for _, p := range programs {
		for _, f := range append([]string{p}, libraries(t, p)...) {
			if !seen[f] {
				seen[f] = true
				copyFile(t, f, filepath.Join(root, usrPath(f)))
			}
		}
	}
	return root
}

// Tools are the host programs ToolsRoot adds to Programs: what the
// isolation tests run besides Python.
var Tools = []string{"/usr/bin/getent", "/usr/bin/tr", "/usr/bin/grep", "/usr/bin/sleep", "/usr/bin/hostname",
	"/usr/bin/wc", "/usr/bin/echo", "/usr/bin/true", "/usr/bin/env", "/usr/bin/kill", "/usr/bin/cp", "/usr/bin/python3.11"}

// ToolsRoot is a MiniRoot with Tools and the host's Python standard
// library (/usr/lib/python3.11 without dist-packages, hard-linked when
// the host's /usr is on the same filesystem as dir), /usr/bin/python3
// linking to python3.11: a non-host root that runs the isolation probes.
func ToolsRoot(t testing.TB, dir string) string {
	t.Helper()
	root := MiniRoot(t, dir, append(slices.Clone(Programs), Tools...)...)
	must(t, os.Symlink("python3.11", filepath.Join(root, "usr/bin/python3")))
	const stdlib = "/usr/lib/python3.11"
	seen := map[string]bool{}
	err := filepath.WalkDir(stdlib, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "dist-packages" || d.Name() == "__pycache__" || d.Name() == "test") {
			return filepath.SkipDir
		}
		dst := filepath.Join(root, strings.TrimPrefix(p, "/"))
		switch {
		case d.IsDir():
			return os.MkdirAll(dst, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, dst)
		case !d.Type().IsRegular():
			return nil
		}
		if os.Link(p, dst) != nil {
			copyFile(t, p, dst)
		}
		if strings.HasSuffix(p, ".so") { // extension modules load libraries too
			for _, lib := range libraries(t, p) {
				if _, err := os.Lstat(filepath.Join(root, usrPath(lib))); err != nil && !seen[lib] {
					seen[lib] = true
					copyFile(t, lib, filepath.Join(root, usrPath(lib)))
				}
			}
		}
		return nil
	})
	must(t, err)
	return root
}

// Image makes the EROFS image of root (template.MakeImage) next to it.
func Image(t testing.TB, root string) string {
	t.Helper()
	img := filepath.Join(filepath.Dir(root), "root.erofs")
	if err := template.MakeImage(context.Background(), root, img); err != nil {
		t.Fatalf("make image: %v", err)
	}
	return img
}

// usrPath is where a host file goes in a merged-/usr root: /lib/x and
// /lib64/x live under /usr.
func usrPath(p string) string {
	for _, top := range []string{"/lib/", "/lib64/", "/bin/", "/sbin/"} {
		if strings.HasPrefix(p, top) {
			return "usr" + p
		}
	}
	return strings.TrimPrefix(p, "/")
}

// libraries lists the shared objects program loads (ldd), as host paths.
func libraries(t testing.TB, program string) []string {
	t.Helper()
	out, err := exec.Command("ldd", program).Output()
	if err != nil {
		t.Fatalf("ldd %s: %v", program, err)
	}
	var libs []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		for _, f := range strings.Fields(sc.Text()) {
			if strings.HasPrefix(f, "/") {
				libs = append(libs, f)
			}
		}
	}
	return libs
}

func copyFile(t testing.TB, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	must(t, err)
	defer in.Close()
	fi, err := in.Stat()
	must(t, err)
	must(t, os.MkdirAll(filepath.Dir(dst), 0o755))
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm())
	must(t, err)
	_, err = io.Copy(out, in)
	must(t, err)
	must(t, out.Close())
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Import stores root (a directory, e.g. a MiniRoot) in s as the template
// name: a one-layer OCI image layout of it, with env as its config's.
func Import(t testing.TB, s *template.Store, name, root string, env ...string) template.Template {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	must(t, tw.AddFS(os.DirFS(root)))
	must(t, tw.Close())
	b := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	must(t, err)
	img, err := mutate.AppendLayers(empty.Image, layer)
	must(t, err)
	cf, err := img.ConfigFile()
	must(t, err)
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Config.Env = "linux", "amd64", env
	img, err = mutate.ConfigFile(img, cf)
	must(t, err)
	tp, err := s.Import(context.Background(), Layout(t, img), template.Options{Name: name})
	must(t, err)
	return tp
}

// DebianKernel is the template store in the user's cache directory
// (~/.cache/cubicle-test, shared with internal/template's TestBuildDebian)
// holding the template DebianKernelName: Debian bookworm minbase with
// Debian's python3-ipykernel and nodejs, built by mmdebstrap from the apt
// mirror. The first build took 4 minutes here (mmdebstrap on a loaded
// VM); later runs find it stored and take a second.
func DebianKernel(t testing.TB) *template.Store {
	t.Helper()
	return Debian(t, DebianKernelName, func(tp template.Template) bool { return tp.Kernel }, "python3-ipykernel", "nodejs")
}

// DebianPip is DebianKernel's store holding the template DebianPipName:
// Debian bookworm minbase with Debian's python3-pip (and so setuptools
// and wheel), no kernel.
func DebianPip(t testing.TB) *template.Store {
	t.Helper()
	return Debian(t, DebianPipName, func(tp template.Template) bool { return tp.Python != "" }, "python3-pip")
}

// DebianPipName names DebianPip's template.
const DebianPipName = "debian-pip"

// Debian is the store of the user's cache directory (see DebianKernel)
// with the template name: built from Debian bookworm minbase with
// packages unless stored and ok.
func Debian(t testing.TB, name string, ok func(template.Template) bool, packages ...string) *template.Store {
	t.Helper()
	cache, err := os.UserCacheDir()
	must(t, err)
	s, err := template.Open(filepath.Join(cache, "cubicle-test", "templates"), template.Limits{MaxBytes: 4 << 30, MaxFiles: 500000})
	must(t, err)
	ctx := context.Background()
	if tp, err := s.Get(ctx, name); err == nil && ok(tp) {
		return s
	}
	b, err := json.Marshal(map[string][]string{"packages": packages})
	must(t, err)
	spec := filepath.Join(t.TempDir(), "debian.json")
	must(t, os.WriteFile(spec, b, 0o600))
	_, err = s.Build(ctx, spec, false, template.Options{Name: name, Replace: true})
	must(t, err)
	return s
}

// DebianKernelName names DebianKernel's template.
const DebianKernelName = "debian-kernel"

// DebianKernelImage is DebianKernel's template as an OCI image: one
// uncompressed layer, the mmdebstrap tar the build cached (so importing
// or pulling it into DebianKernel's store finds its layer and root
// stored), with the template's environment.
func DebianKernelImage(t testing.TB) v1.Image {
	t.Helper()
	s := DebianKernel(t)
	tp, err := s.Get(context.Background(), DebianKernelName)
	must(t, err)
	want, err := v1.NewHash(tp.Layers[0])
	must(t, err)
	tars, _ := filepath.Glob(filepath.Join(s.Dir(), "cache", "build-*.tar"))
	for _, p := range tars {
		f, err := os.Open(p)
		must(t, err)
		h, size, err := v1.SHA256(f)
		f.Close()
		must(t, err)
		if h != want {
			continue
		}
		img, err := mutate.AppendLayers(empty.Image, rawLayer{path: p, hash: h, size: size})
		must(t, err)
		cf, err := img.ConfigFile()
		must(t, err)
		cf = cf.DeepCopy()
		cf.OS, cf.Architecture, cf.Config.Env = "linux", "amd64", tp.Defaults.Env
		img, err = mutate.ConfigFile(img, cf)
		must(t, err)
		return img
	}
	t.Fatalf("no cached build of %s in %s", DebianKernelName, s.Dir())
	return nil
}

// rawLayer is an uncompressed layer tar on disk, stored and sent as it is.
type rawLayer struct {
	path string
	hash v1.Hash
	size int64
}

func (l rawLayer) Digest() (v1.Hash, error)             { return l.hash, nil }
func (l rawLayer) DiffID() (v1.Hash, error)             { return l.hash, nil }
func (l rawLayer) Compressed() (io.ReadCloser, error)   { return os.Open(l.path) }
func (l rawLayer) Uncompressed() (io.ReadCloser, error) { return os.Open(l.path) }
func (l rawLayer) Size() (int64, error)                 { return l.size, nil }
func (l rawLayer) MediaType() (types.MediaType, error)  { return types.OCIUncompressedLayer, nil }

// Layout writes img as an OCI image layout directory and returns it.
func Layout(t testing.TB, img v1.Image) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "layout")
	p, err := layout.Write(dir, empty.Index)
	must(t, err)
	must(t, p.AppendImage(img))
	return dir
}

// Registry serves img from a registry on 127.0.0.1 (go-containerregistry's)
// until the test ends, and returns its reference.
func Registry(t testing.TB, img v1.Image) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	ref := strings.TrimPrefix(srv.URL, "http://") + "/test/image:v1"
	r, err := name.ParseReference(ref)
	must(t, err)
	must(t, remote.Write(r, img))
	return ref
}
