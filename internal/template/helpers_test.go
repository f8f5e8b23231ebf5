package template_test

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/cubicle-sandbox/cubicle/internal/template"
)

var mtime = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

// ent is one tar entry of a test layer.
type ent struct {
	name     string
	typ      byte
	mode     int64
	body     string
	link     string
	uid, gid int
}

func dir(n string) ent                 { return ent{name: n, typ: tar.TypeDir, mode: 0o755} }
func file(n, body string, m int64) ent { return ent{name: n, typ: tar.TypeReg, mode: m, body: body} }
func symlink(n, to string) ent         { return ent{name: n, typ: tar.TypeSymlink, mode: 0o777, link: to} }
func hardlink(n, to string) ent        { return ent{name: n, typ: tar.TypeLink, mode: 0o644, link: to} }

// tarOf writes the entries as an uncompressed tar.
func tarOf(t *testing.T, ents ...ent) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Linkname: e.link, Uid: e.uid, Gid: e.gid,
			ModTime: mtime, Size: int64(len(e.body)), Format: tar.FormatPAX}
		if e.typ == tar.TypeChar || e.typ == tar.TypeBlock {
			h.Devmajor, h.Devminor = 1, 3
		}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, e.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func layerOf(t *testing.T, ents ...ent) v1.Layer {
	t.Helper()
	b := tarOf(t, ents...)
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// imageOf is an image of the layers (lowest first) with an env and a
// working directory.
func imageOf(t *testing.T, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"}
	cf.Config.WorkingDir = "/srv"
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// writeLayout writes img as an OCI image layout directory.
func writeLayout(t *testing.T, img v1.Image) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "layout")
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	return dir
}

// writeDocker writes img as a `docker save` archive.
func writeDocker(t *testing.T, img v1.Image) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "image.tar")
	tag, err := name.NewTag("example.com/test/image:v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := tarball.WriteToFile(p, tag, img); err != nil {
		t.Fatal(err)
	}
	return p
}

// tarDir writes a tar of a directory's regular files and directories.
func tarDir(t *testing.T, dir string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "layout.tar")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		h, err := tar.FileInfoHeader(fi, "")
		if err != nil {
			return err
		}
		h.Name = rel
		if err := tw.WriteHeader(h); err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err == nil {
			_, err = tw.Write(b)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

// listing describes every entry of a tree, one line each, sorted:
// "path type perms uid:gid" then the link target or the content.
func listing(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		line := fmt.Sprintf("%s %s %04o %d:%d", rel, kind(fi.Mode()), uint32(st.Mode)&0o7777, st.Uid, st.Gid)
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			line += " -> " + target
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			line += " " + strings.TrimSpace(string(b))
		}
		out = append(out, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// withMountPoints adds to a root's listing the mount points every root
// gets for computers (dev, proc, tmp, workspace, and files in etc) that
// it does not have.
func withMountPoints(want ...string) []string {
	have := map[string]bool{}
	for _, w := range want {
		have[strings.Fields(w)[0]] = true
	}
	out := slices.Clone(want)
	for _, d := range []string{"dev", "etc", "proc", "tmp", "workspace"} {
		if !have[d] {
			out = append(out, d+" dir 0755 0:0")
		}
	}
	for _, f := range []string{"group", "hostname", "hosts", "nsswitch.conf", "passwd", "resolv.conf"} {
		if !have["etc/"+f] {
			out = append(out, "etc/"+f+" file 0644 0:0 ")
		}
	}
	sort.Strings(out)
	return out
}

func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "dir"
	case m&fs.ModeSymlink != 0:
		return "link"
	case m.IsRegular():
		return "file"
	}
	return "other:" + m.Type().String()
}

func sameLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("%s:\ngot:\n  %s\nwant:\n  %s", what, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func openStore(t *testing.T, limits template.Limits) *template.Store {
	t.Helper()
	if limits == (template.Limits{}) {
		limits = template.Limits{MaxBytes: 1 << 30, MaxFiles: 100000}
	}
	s, err := template.Open(filepath.Join(t.TempDir(), "templates"), limits)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// entries lists a store subdirectory.
func entries(t *testing.T, s *template.Store, sub string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(s.Dir(), sub))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}
