package template

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Spec is a template built from Debian packages with mmdebstrap (a JSON
// file: {"suite": "bookworm", "variant": "minbase", "packages": [...],
// "mirror": "http://deb.debian.org/debian"}).
type Spec struct {
	// Suite is the Debian release (default bookworm).
	Suite string `json:"suite"`
	// Variant is mmdebstrap's: minbase (default), essential, apt or required.
	Variant string `json:"variant"`
	// Packages are installed on top (e.g. python3-minimal).
	Packages []string `json:"packages"`
	// Mirror is the apt mirror (default http://deb.debian.org/debian).
	Mirror string `json:"mirror"`
}

var (
	suiteRE   = regexp.MustCompile(`^[a-z][a-z0-9-]{1,31}$`)
	packageRE = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]{1,63}$`)
	variants  = map[string]bool{"minbase": true, "essential": true, "apt": true, "required": true}
)

// ReadSpec reads and checks a spec file, filling in the defaults.
func ReadSpec(path string) (Spec, error) {
	var sp Spec
	b, err := os.ReadFile(path)
	if err != nil {
		return sp, errf(ErrInvalid, "spec %s: %v", path, err)
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sp); err != nil {
		return sp, errf(ErrInvalid, "spec %s: %v (want {\"suite\", \"variant\", \"packages\", \"mirror\"})", path, err)
	}
	if sp.Suite == "" {
		sp.Suite = "bookworm"
	}
	if sp.Variant == "" {
		sp.Variant = "minbase"
	}
	if sp.Mirror == "" {
		sp.Mirror = "http://deb.debian.org/debian"
	}
	switch {
	case !suiteRE.MatchString(sp.Suite):
		return sp, errf(ErrInvalid, "spec %s: suite %q is not a Debian release name like bookworm", path, sp.Suite)
	case !variants[sp.Variant]:
		return sp, errf(ErrInvalid, "spec %s: variant %q: use minbase, essential, apt or required", path, sp.Variant)
	case !strings.HasPrefix(sp.Mirror, "http://") && !strings.HasPrefix(sp.Mirror, "https://") && !strings.HasPrefix(sp.Mirror, "file:/"):
		return sp, errf(ErrInvalid, "spec %s: mirror %q is not an http(s):// or file:/ URL", path, sp.Mirror)
	}
	for _, p := range sp.Packages {
		if !packageRE.MatchString(p) {
			return sp, errf(ErrInvalid, "spec %s: %q is not a Debian package name", path, p)
		}
	}
	return sp, nil
}

// Build makes the root of a spec with mmdebstrap and stores it as a
// template (one layer). The root's tar is cached in cache/ by the spec's
// digest, so building the same spec again reuses it unless refresh.
func (s *Store) Build(ctx context.Context, specPath string, refresh bool, opts Options) (Template, error) {
	sp, err := ReadSpec(specPath)
	if err != nil {
		return Template{}, err
	}
	abs, _ := filepath.Abs(specPath)
	return s.withImport(ctx, opts, func() (v1.Image, Source, func(), error) {
		tarPath, err := s.buildTar(ctx, sp, refresh, opts.Progress)
		if err != nil {
			return nil, Source{}, nil, err
		}
		img, err := singleLayerImage(tarPath)
		return img, Source{Kind: kindBuild, Ref: abs, Digest: specDigest(sp)}, func() {}, err
	})
}

// singleLayerImage is an image of one layer tar, for this host's platform.
// It is made with go-containerregistry's partial package rather than
// mutate, which would gzip the whole layer to compute a manifest that an
// import of a build does not use.
func singleLayerImage(tarPath string) (v1.Image, error) {
	f, err := os.Open(tarPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	diffID, _, err := v1.SHA256(f)
	if err != nil {
		return nil, err
	}
	cf := v1.ConfigFile{OS: platform.OS, Architecture: runtime.GOARCH,
		RootFS: v1.RootFS{Type: "layers", DiffIDs: []v1.Hash{diffID}},
		Config: v1.Config{Env: []string{"PATH=" + defaultPath}}}
	raw, err := json.Marshal(cf)
	if err != nil {
		return nil, err
	}
	return partial.UncompressedToImage(&tarImage{path: tarPath, diffID: diffID, config: raw})
}

// tarImage is the core of a one-layer image whose layer is a tar file.
type tarImage struct {
	path   string
	diffID v1.Hash
	config []byte
}

func (t *tarImage) RawConfigFile() ([]byte, error)      { return t.config, nil }
func (t *tarImage) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
func (t *tarImage) LayerByDiffID(h v1.Hash) (partial.UncompressedLayer, error) {
	if h != t.diffID {
		return nil, fmt.Errorf("no layer %s", h)
	}
	return tarLayer{t}, nil
}

// tarLayer is tarImage's layer.
type tarLayer struct{ t *tarImage }

func (l tarLayer) DiffID() (v1.Hash, error)             { return l.t.diffID, nil }
func (l tarLayer) Uncompressed() (io.ReadCloser, error) { return os.Open(l.t.path) }
func (l tarLayer) MediaType() (types.MediaType, error)  { return types.OCIUncompressedLayer, nil }

func specDigest(sp Spec) string {
	b, _ := json.Marshal(sp)
	return fmt.Sprintf("sha256:%x", sha256.Sum256(b))
}

// buildTar returns the cached tar of the spec, running mmdebstrap first
// when there is none (or refresh); its output goes to progress as lines.
func (s *Store) buildTar(ctx context.Context, sp Spec, refresh bool, progress func(Progress)) (string, error) {
	cache := filepath.Join(s.dir, "cache")
	if err := os.MkdirAll(cache, 0o700); err != nil {
		return "", err
	}
	out := filepath.Join(cache, "build-"+hexOf(specDigest(sp))+".tar")
	if _, err := os.Stat(out); err == nil && !refresh {
		report(progress, Progress{Step: "build", State: "present", Digest: specDigest(sp)})
		return out, nil
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		return "", errf(ErrInvalid, "building a template needs mmdebstrap (apt-get install mmdebstrap)")
	}
	tmp := filepath.Join(s.dir, "tmp", "build-"+hexOf(specDigest(sp))+".tar")
	args := []string{"--variant=" + sp.Variant, "--format=tar"}
	if len(sp.Packages) > 0 {
		args = append(args, "--include="+strings.Join(sp.Packages, ","))
	}
	cmd := exec.CommandContext(ctx, "mmdebstrap", append(args, sp.Suite, tmp, sp.Mirror)...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("starting mmdebstrap: %w", err)
	}
	var last string
	go func() {
		err := cmd.Wait()
		pw.CloseWithError(err)
	}()
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		last = sc.Text()
		report(progress, Progress{Step: "build", State: "running", Message: last})
	}
	if err := sc.Err(); err != nil {
		os.Remove(tmp)
		return "", errf(ErrInvalid, "mmdebstrap failed (%v); its last line: %s", err, last)
	}
	return out, os.Rename(tmp, out)
}

func report(progress func(Progress), p Progress) {
	if progress != nil {
		progress(p)
	}
}
