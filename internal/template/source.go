package template

import (
	"archive/tar"
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Source kinds.
const (
	kindLayout   = "oci-layout"
	kindDocker   = "docker-archive"
	kindRegistry = "registry"
	kindBuild    = "build"
)

// platform is the only platform a template can be for: this host's.
var platform = v1.Platform{OS: "linux", Architecture: runtime.GOARCH}

// Import stores the image of an archive as a template: an OCI image layout
// (a directory, or a tar of one) or a `docker save` archive.
func (s *Store) Import(ctx context.Context, archive string, opts Options) (Template, error) {
	return s.withImport(ctx, opts, func() (v1.Image, Source, func(), error) {
		return s.openArchive(archive)
	})
}

// Pull stores an image of an OCI registry as a template (for this host's
// platform when the reference names an index); credentials come from the
// Docker config (~/.docker/config.json), else the pull is anonymous.
func (s *Store) Pull(ctx context.Context, ref string, opts Options) (Template, error) {
	return s.withImport(ctx, opts, func() (v1.Image, Source, func(), error) {
		return openRemote(ctx, ref)
	})
}

func (s *Store) withImport(ctx context.Context, opts Options, open func() (v1.Image, Source, func(), error)) (Template, error) {
	if err := CheckName(opts.Name); err != nil {
		return Template{}, err
	}
	if _, err := os.Stat(s.metaPath(opts.Name)); err == nil && !opts.Replace {
		return Template{}, existsErr(opts.Name)
	}
	unlock, err := lockFile(ctx, filepath.Join(s.dir, "lock"), true)
	if err != nil {
		return Template{}, err
	}
	defer unlock()
	img, src, done, err := open()
	if err != nil {
		return Template{}, err
	}
	defer done()
	return s.importImage(ctx, img, src, opts)
}

func openRemote(ctx context.Context, ref string) (v1.Image, Source, func(), error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, Source{}, nil, errf(ErrInvalid, "%q is not an image reference like registry.example.com/team/image:tag: %v", ref, err)
	}
	img, err := remote.Image(r, remote.WithContext(ctx), remote.WithPlatform(platform),
		remote.WithAuthFromKeychain(authn.DefaultKeychain))
	if err != nil {
		return nil, Source{}, nil, errf(ErrInvalid, "pulling %s: %v", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		return nil, Source{}, nil, errf(ErrCorrupt, "pulling %s: %v", ref, err)
	}
	return img, Source{Kind: kindRegistry, Ref: r.Name(), Digest: d.String()}, func() {}, nil
}

// openArchive opens a layout directory, a layout tar (unpacked to tmp/
// first) or a docker archive.
func (s *Store) openArchive(archive string) (v1.Image, Source, func(), error) {
	abs, err := filepath.Abs(archive)
	if err != nil {
		return nil, Source{}, nil, err
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, Source{}, nil, errf(ErrInvalid, "archive %s: %v", archive, err)
	}
	if fi.IsDir() {
		img, digest, err := layoutImage(abs)
		return img, Source{Kind: kindLayout, Ref: abs, Digest: digest}, func() {}, err
	}
	kind, err := sniffTar(abs)
	if err != nil {
		return nil, Source{}, nil, err
	}
	if kind == kindDocker {
		img, err := tarball.ImageFromPath(abs, nil)
		if err != nil {
			return nil, Source{}, nil, errf(ErrInvalid, "docker archive %s: %v", archive, err)
		}
		return img, Source{Kind: kindDocker, Ref: abs}, func() {}, nil
	}
	dir, err := s.tempDir("layout-")
	if err != nil {
		return nil, Source{}, nil, err
	}
	done := func() { os.RemoveAll(dir) }
	if err := s.extractLayout(abs, dir); err != nil {
		done()
		return nil, Source{}, nil, err
	}
	img, digest, err := layoutImage(dir)
	if err != nil {
		done()
		return nil, Source{}, nil, err
	}
	return img, Source{Kind: kindLayout, Ref: abs, Digest: digest}, done, nil
}

// sniffTar says whether a tar is a docker archive (it has manifest.json;
// Docker 25 and later also write an OCI layout beside it) or an OCI layout.
func sniffTar(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", errf(ErrInvalid, "archive %s: %v", p, err)
	}
	defer f.Close()
	if magic, _ := bufio.NewReader(f).Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		return "", errf(ErrInvalid, "archive %s is gzip-compressed; decompress it first (gunzip)", p)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	tr, layoutSeen := tar.NewReader(f), false
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", errf(ErrInvalid, "archive %s is not a tar of an OCI image layout or a docker save archive: %v", p, err)
		}
		switch path.Clean(h.Name) {
		case "manifest.json":
			return kindDocker, nil
		case "oci-layout", "index.json":
			layoutSeen = true
		}
	}
	if !layoutSeen {
		return "", errf(ErrInvalid, "archive %s has neither manifest.json (docker save) nor index.json (OCI image layout)", p)
	}
	return kindLayout, nil
}

var layoutNameRE = regexp.MustCompile(`^(oci-layout|index\.json|blobs/[a-z0-9]+/[a-f0-9]{32,128})$`)

// extractLayout unpacks the files of an OCI layout tar (oci-layout,
// index.json, blobs/ALG/HEX; anything else is skipped) into dir, bounded by
// template.max_bytes.
func (s *Store) extractLayout(archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	tr, total := tar.NewReader(f), int64(0)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return errf(ErrCorrupt, "archive %s: %v", archive, err)
		}
		n := strings.TrimPrefix(path.Clean("/"+h.Name), "/")
		if h.Typeflag != tar.TypeReg || !layoutNameRE.MatchString(n) {
			continue
		}
		if total += h.Size; total > s.limits.MaxBytes {
			return errf(ErrLimit, "archive %s holds more than template.max_bytes (%d bytes); raise template.max_bytes (CUBICLE_TEMPLATE_MAX_BYTES) if it is trusted to be this big", archive, s.limits.MaxBytes)
		}
		if err := writeNew(filepath.Join(dir, filepath.FromSlash(n)), tr); err != nil {
			return err
		}
	}
}

func writeNew(p string, r io.Reader) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// layoutImage picks the image of an OCI layout: the only one, or the only
// one for this host's platform.
func layoutImage(dir string) (v1.Image, string, error) {
	if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err != nil {
		return nil, "", errf(ErrInvalid, "%s is not an OCI image layout (no oci-layout file)", dir)
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, "", errf(ErrInvalid, "OCI image layout %s: %v", dir, err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return nil, "", errf(ErrInvalid, "OCI image layout %s: %v", dir, err)
	}
	var found []v1.Descriptor
	if err := collectImages(idx, &found, 0); err != nil {
		return nil, "", errf(ErrInvalid, "OCI image layout %s: %v", dir, err)
	}
	var match []v1.Descriptor
	for _, d := range found {
		if d.Platform == nil || d.Platform.Satisfies(platform) {
			match = append(match, d)
		}
	}
	switch {
	case len(match) == 0:
		return nil, "", errf(ErrInvalid, "OCI image layout %s has no image for %s/%s (%d images for other platforms)", dir, platform.OS, platform.Architecture, len(found))
	case len(match) > 1:
		return nil, "", errf(ErrInvalid, "OCI image layout %s has %d images for %s/%s; import a layout with one", dir, len(match), platform.OS, platform.Architecture)
	}
	img, err := p.Image(match[0].Digest)
	if err != nil {
		return nil, "", errf(ErrInvalid, "OCI image layout %s: %v", dir, err)
	}
	return img, match[0].Digest.String(), nil
}

// collectImages lists the image manifests of an index, nested indexes included.
func collectImages(idx v1.ImageIndex, out *[]v1.Descriptor, depth int) error {
	if depth > 4 {
		return errors.New("indexes nested too deeply")
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	for _, d := range m.Manifests {
		switch {
		case d.MediaType.IsImage():
			*out = append(*out, d)
		case d.MediaType.IsIndex():
			child, err := idx.ImageIndex(d.Digest)
			if err != nil {
				return err
			}
			if err := collectImages(child, out, depth+1); err != nil {
				return err
			}
		}
	}
	if len(*out) == 0 {
		return fmt.Errorf("no image manifest in the index")
	}
	return nil
}
