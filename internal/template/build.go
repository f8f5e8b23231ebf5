package template

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Spec is a template to build (a JSON file): a Debian release made by
// mmdebstrap ({"suite": "bookworm", "variant": "minbase", "packages":
// [...], "mirror": "http://deb.debian.org/debian"}) or another template
// ({"base": "debian"}), then files copied in and environment variables
// set ({"files": [{"src": "app", "dst": "/opt/app"}], "env": ["A=b"]}).
type Spec struct {
	// Suite is the Debian release (default bookworm).
	Suite string `json:"suite,omitempty"`
	// Variant is mmdebstrap's: minbase (default), essential, apt or required.
	Variant string `json:"variant,omitempty"`
	// Packages are installed on top (e.g. python3-minimal).
	Packages []string `json:"packages,omitempty"`
	// Mirror is the apt mirror (default http://deb.debian.org/debian).
	Mirror string `json:"mirror,omitempty"`
	// Base is a stored template to build on instead of a Debian release
	// (Suite, Variant, Packages and Mirror are then not given): its
	// layers, environment and working directory.
	Base string `json:"base,omitempty"`
	// Files are copied into the root, as one layer on top.
	Files []FileSpec `json:"files,omitempty"`
	// Env is added to the template's environment (NAME=value; a name
	// set before is replaced).
	Env []string `json:"env,omitempty"`
	// Run are shell commands (/bin/sh -c) run one after another in a
	// build computer on the root so far, after Files and Env: each
	// step's changes to the root become a layer. See RunStep.
	Run []string `json:"run,omitempty"`
	// RunLimits bound each run step (DefaultRunLimits, at most
	// MaxRunLimits).
	RunLimits RunLimits `json:"run_limits,omitzero"`
	// NetworkPolicy gives the run steps' build computers the internet
	// the policy allows, through the deployment's egress (NetworkPolicy).
	NetworkPolicy *Allowlist `json:"network_policy,omitempty"`
	// Defaults are what the template asks of its computers (Computer),
	// over its base's.
	Defaults ComputerDefaults `json:"defaults,omitzero"`
}

// FileSpec is a file or directory tree copied into a built template: Src
// on the host (relative to the spec file's directory) to Dst, an absolute
// path in the root. Owners become root; setuid and setgid bits are
// dropped; symbolic links are copied as links.
type FileSpec struct {
	Src string `json:"src"`
	Dst string `json:"dst"`
}

var (
	suiteRE   = regexp.MustCompile(`^[a-z][a-z0-9-]{1,31}$`)
	packageRE = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]{1,63}$`)
	variants  = map[string]bool{"minbase": true, "essential": true, "apt": true, "required": true}
	envRE     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
)

// ReadSpec reads and checks a spec file, filling in the defaults; files'
// sources are made absolute, relative to the file's directory.
func ReadSpec(path string) (Spec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Spec{}, errf(ErrInvalid, "spec %s: %v", path, err)
	}
	sp, err := ParseSpec(b, filepath.Dir(path))
	if err != nil {
		return sp, within(err, "spec %s", path)
	}
	return sp, nil
}

// ParseSpec parses and checks a spec, filling in the defaults. dir is
// where relative files' sources are; "" refuses files (a spec that came
// over the API must not name host paths).
func ParseSpec(b []byte, dir string) (Spec, error) {
	var sp Spec
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sp); err != nil {
		return sp, errf(ErrInvalid, "%v (want {\"suite\", \"variant\", \"packages\", \"mirror\"} or {\"base\"}, and \"files\", \"env\", \"run\", \"run_limits\", \"network_policy\", \"defaults\")", err)
	}
	if dir == "" && len(sp.Files) > 0 {
		return sp, errf(ErrInvalid, "files copy host paths: build a spec with files with 'cubicle template build' on the host")
	}
	if err := sp.check(dir); err != nil {
		return sp, errf(ErrInvalid, "%v", err)
	}
	return sp, sp.Defaults.Check(context.Background(), "defaults")
}

// check validates sp and fills in its defaults; dir is where relative
// sources are.
func (sp *Spec) check(dir string) error {
	if sp.Base != "" {
		if sp.Suite != "" || sp.Variant != "" || len(sp.Packages) > 0 || sp.Mirror != "" {
			return fmt.Errorf("base %q: suite, variant, packages and mirror make a Debian release instead; give one or the other (packages come with a Debian release, as files, or from a run step with a network_policy)", sp.Base)
		}
		if err := CheckName(sp.Base); err != nil {
			return fmt.Errorf("base: %v", err)
		}
	} else if err := sp.checkDebian(); err != nil {
		return err
	}
	for i := range sp.Files {
		f := &sp.Files[i]
		if f.Src == "" || !path.IsAbs(f.Dst) || path.Clean(f.Dst) == "/" || strings.Contains(f.Dst, "\x00") {
			return fmt.Errorf("files[%d]: give src (a host path) and dst (an absolute path in the root, not /)", i)
		}
		if !filepath.IsAbs(f.Src) {
			f.Src = filepath.Join(dir, f.Src)
		}
		if _, err := os.Lstat(f.Src); err != nil {
			return fmt.Errorf("files[%d]: %v", i, err)
		}
		f.Dst = path.Clean(f.Dst)
	}
	for _, kv := range sp.Env {
		if !envRE.MatchString(kv) || strings.ContainsAny(kv, "\x00") {
			return fmt.Errorf("env: %q is not NAME=value", kv)
		}
	}
	return sp.checkRun()
}

// checkDebian checks a Debian release's fields and fills in defaults.
func (sp *Spec) checkDebian() error {
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
		return fmt.Errorf("suite %q is not a Debian release name like bookworm", sp.Suite)
	case !variants[sp.Variant]:
		return fmt.Errorf("variant %q: use minbase, essential, apt or required", sp.Variant)
	case !strings.HasPrefix(sp.Mirror, "http://") && !strings.HasPrefix(sp.Mirror, "https://") && !strings.HasPrefix(sp.Mirror, "file:/"):
		return fmt.Errorf("mirror %q is not an http(s):// or file:/ URL", sp.Mirror)
	}
	for _, p := range sp.Packages {
		if !packageRE.MatchString(p) {
			return fmt.Errorf("%q is not a Debian package name", p)
		}
	}
	return nil
}

// Build makes the root of a spec and stores it as a template: the
// Debian release's one layer (mmdebstrap; its tar is cached in cache/ by
// the release's digest, so building it again reuses it unless refresh) or
// the base template's layers, then a layer of the spec's files.
func (s *Store) Build(ctx context.Context, specPath string, refresh bool, opts Options) (Template, error) {
	sp, err := ReadSpec(specPath)
	if err != nil {
		return Template{}, err
	}
	abs, _ := filepath.Abs(specPath)
	return s.BuildSpec(ctx, sp, abs, refresh, opts)
}

// BuildSpec is Build of a checked spec (ParseSpec); ref says where it came
// from (Source.Ref).
func (s *Store) BuildSpec(ctx context.Context, sp Spec, ref string, refresh bool, opts Options) (Template, error) {
	if sp.NetworkPolicy != nil && !opts.Network {
		return Template{}, errf(ErrInvalid, "network_policy: run steps reach the internet only through a server's egress: build this spec over the API (POST /v1/templates) on a deployment with network.internet")
	}
	opts.Computer = sp.Defaults
	if sp.Base != "" {
		if base, err := s.Get(ctx, sp.Base); err == nil { // a missing base fails below
			opts.Computer = base.Computer.merge(sp.Defaults)
		}
	}
	return s.withImport(ctx, opts, func() (v1.Image, Source, func(), error) {
		img := &builtImage{tars: map[v1.Hash]string{}}
		if sp.Base != "" {
			base, err := s.Get(ctx, sp.Base)
			if err != nil {
				return nil, Source{}, nil, within(err, "base")
			}
			if err := img.onBase(base); err != nil {
				return nil, Source{}, nil, err
			}
		} else {
			tarPath, err := s.buildTar(ctx, sp, refresh, opts.Progress)
			if err != nil {
				return nil, Source{}, nil, err
			}
			if err := img.addTar(tarPath); err != nil {
				return nil, Source{}, nil, err
			}
			img.config.Config.Env = []string{"PATH=" + defaultPath}
		}
		dir, err := s.tempDir("build-")
		if err != nil {
			return nil, Source{}, nil, err
		}
		cleanup := func() { os.RemoveAll(dir) }
		v, err := s.buildLayers(ctx, sp, img, dir, opts)
		if err != nil {
			cleanup()
			return nil, Source{}, nil, err
		}
		return v, Source{Kind: kindBuild, Ref: ref, Digest: buildDigest(sp)}, cleanup, nil
	})
}

// buildLayers adds the spec's layers on top of img's: its files, then a
// layer per run step (after the spec's env is set, which the steps see);
// dir holds the layers' tars until the import read them.
func (s *Store) buildLayers(ctx context.Context, sp Spec, img *builtImage, dir string, opts Options) (v1.Image, error) {
	if len(sp.Files) > 0 {
		tarPath := filepath.Join(dir, "files.tar")
		if err := writeFilesTar(tarPath, sp.Files); err != nil {
			return nil, errf(ErrInvalid, "files: %v", err)
		}
		if err := img.addTar(tarPath); err != nil {
			return nil, err
		}
	}
	img.config.Config.Env = mergeEnv(img.config.Config.Env, sp.Env)
	if err := s.runSteps(ctx, sp, img, dir, opts); err != nil {
		return nil, err
	}
	return img.image()
}

// mergeEnv is env with set's variables added, replacing those of the
// same name.
func mergeEnv(env, set []string) []string {
	out := slices.Clone(env)
	for _, kv := range set {
		name, _, _ := strings.Cut(kv, "=")
		out = slices.DeleteFunc(out, func(o string) bool { return strings.HasPrefix(o, name+"=") })
		out = append(out, kv)
	}
	return out
}

// builtImage is an image of a build, for this host's platform: a base
// template's layers, which are in the store already (and are never read
// again), and tar files. It is made with go-containerregistry's partial
// package rather than mutate, which would gzip every layer to compute a
// manifest that an import of a build does not use.
type builtImage struct {
	config v1.ConfigFile
	tars   map[v1.Hash]string // the layers to read, by diff_id
}

// onBase starts the image from base: its layers and its defaults.
func (b *builtImage) onBase(base Template) error {
	for _, l := range base.Layers {
		h, err := v1.NewHash(l)
		if err != nil {
			return errf(ErrCorrupt, "base %s: layer %q: %v", base.Name, l, err)
		}
		b.config.RootFS.DiffIDs = append(b.config.RootFS.DiffIDs, h)
	}
	b.config.Config = v1.Config{Env: slices.Clone(base.Defaults.Env), WorkingDir: base.Defaults.WorkingDir,
		User: base.Defaults.User, Entrypoint: base.Defaults.Entrypoint, Cmd: base.Defaults.Cmd}
	return nil
}

// addTar adds the layer tar at path on top.
func (b *builtImage) addTar(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	diffID, _, err := v1.SHA256(f)
	if err != nil {
		return err
	}
	b.config.RootFS.DiffIDs = append(b.config.RootFS.DiffIDs, diffID)
	b.tars[diffID] = path
	return nil
}

func (b *builtImage) image() (v1.Image, error) {
	b.config.OS, b.config.Architecture, b.config.RootFS.Type = platform.OS, runtime.GOARCH, "layers"
	raw, err := json.Marshal(b.config)
	if err != nil {
		return nil, err
	}
	return partial.UncompressedToImage(&builtCore{b: b, raw: raw})
}

// builtCore is builtImage as partial's uncompressed image core.
type builtCore struct {
	b   *builtImage
	raw []byte
}

func (c *builtCore) RawConfigFile() ([]byte, error)      { return c.raw, nil }
func (c *builtCore) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
func (c *builtCore) LayerByDiffID(h v1.Hash) (partial.UncompressedLayer, error) {
	return builtLayer{diffID: h, path: c.b.tars[h]}, nil
}

// builtLayer is a layer of a builtImage: a tar file, or (no path) a base
// template's layer that is in the store.
type builtLayer struct {
	diffID v1.Hash
	path   string
}

func (l builtLayer) DiffID() (v1.Hash, error)            { return l.diffID, nil }
func (l builtLayer) MediaType() (types.MediaType, error) { return types.OCIUncompressedLayer, nil }
func (l builtLayer) Uncompressed() (io.ReadCloser, error) {
	if l.path == "" {
		return nil, errf(ErrCorrupt, "the base's layer %s is no longer in the store: import the base again", short(l.diffID.String()))
	}
	return os.Open(l.path)
}

// specDigest is the digest of a spec's Debian release (mmdebstrap's
// input, what its tar is cached by), as the JSON of its four fields.
func specDigest(sp Spec) string {
	b, _ := json.Marshal(struct {
		Suite    string   `json:"suite"`
		Variant  string   `json:"variant"`
		Packages []string `json:"packages"`
		Mirror   string   `json:"mirror"`
	}{sp.Suite, sp.Variant, sp.Packages, sp.Mirror})
	return fmt.Sprintf("sha256:%x", sha256.Sum256(b))
}

// buildDigest is the digest of a whole spec (Source.Digest of a build).
func buildDigest(sp Spec) string {
	b, _ := json.Marshal(sp)
	return fmt.Sprintf("sha256:%x", sha256.Sum256(b))
}

// buildStopGrace is how long a cancelled build has to clean up after the
// SIGTERM before its process group is killed.
const buildStopGrace = 20 * time.Second

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
	// mmdebstrap's scratch (its chroot, a GnuPG home: 200-300 MB) goes in a
	// directory of the store's that is removed when the build ends, however
	// it ends.
	scratch, err := os.MkdirTemp(filepath.Join(s.dir, "tmp"), "mmdebstrap-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(scratch)
	cmd := exec.CommandContext(ctx, "mmdebstrap", append(args, sp.Suite, tmp, sp.Mirror)...)
	cmd.Env = append(os.Environ(), "TMPDIR="+scratch)
	// Its own process group: a build whose caller went away (ctx) is asked
	// to stop with SIGTERM, which mmdebstrap cleans up after, the whole
	// group is killed after buildStopGrace, and none of its apt or dpkg
	// children outlive it (killing mmdebstrap alone left them running).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = buildStopGrace
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("starting mmdebstrap: %w", err)
	}
	var last string
	waited := make(chan struct{})
	defer func() { <-waited }() // the group is gone before the scratch is removed
	go func() {
		defer close(waited)
		err := cmd.Wait()
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // what ignored the SIGTERM
		groupGone(cmd.Process.Pid, buildStopGrace)
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

// groupGone waits, at most d, until process group pgid has no member
// left (killed ones may take a moment to exit and be reaped).
func groupGone(pgid int, d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if syscall.Kill(-pgid, 0) == syscall.ESRCH {
			return
		}
	}
}

func report(progress func(Progress), p Progress) {
	if progress != nil {
		progress(p)
	}
}
