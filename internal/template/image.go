package template

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// layerMeta is layers/<hex>/layer.json: what a layer's tree does not show.
type layerMeta struct {
	DiffID string `json:"diff_id"`
	// Bytes is the size of the uncompressed tar stream.
	Bytes int64 `json:"bytes"`
	// Entries is the number of tar entries (whiteouts and skipped ones too).
	Entries   int64    `json:"entries"`
	Whiteouts []string `json:"whiteouts,omitempty"`
	Opaque    []string `json:"opaque,omitempty"`
	// Implicit are the directories made for entries whose parent the tar
	// did not list; they do not change a lower layer's directory.
	Implicit []string `json:"implicit_dirs,omitempty"`
	Skipped  Skipped  `json:"skipped"`
}

// rootMeta is roots/<hex>/root.json.
type rootMeta struct {
	ChainID string   `json:"chain_id"`
	Layers  []string `json:"layers"`
	Size    int64    `json:"size_bytes"`
	Files   int64    `json:"files"`
}

// budget is what is left of an import's limits.
type budget struct {
	limits       Limits
	bytes, files int64
}

func (b *budget) addBytes(n int64) error {
	b.bytes += n
	if b.bytes > b.limits.MaxBytes {
		return errf(ErrLimit, "the image's layers unpack to more than template.max_bytes (%d bytes); raise template.max_bytes (CUBICLE_TEMPLATE_MAX_BYTES) if the image is trusted to be this big", b.limits.MaxBytes)
	}
	return nil
}

func (b *budget) addFiles(n int64) error {
	b.files += n
	if b.files > b.limits.MaxFiles {
		return errf(ErrLimit, "the image's layers hold more than template.max_files (%d) entries; raise template.max_files (CUBICLE_TEMPLATE_MAX_FILES) if the image is trusted to be this big", b.limits.MaxFiles)
	}
	return nil
}

// importImage stores img as the template opts.Name. The caller holds the
// store's shared lock.
func (s *Store) importImage(ctx context.Context, img v1.Image, src Source, opts Options) (Template, error) {
	progress := opts.Progress
	if progress == nil {
		progress = func(Progress) {}
	}
	cfg, id, metas, err := s.storeImageLayers(ctx, img, src, progress)
	if err != nil {
		return Template{}, err
	}
	rm, err := s.root(ctx, metas, progress)
	if err != nil {
		return Template{}, err
	}
	t := Template{
		Name: opts.Name, ID: id, Root: rm.ChainID, Layers: rm.Layers, Source: src,
		Created: time.Now().UTC().Truncate(time.Second), Size: rm.Size, Files: rm.Files,
		Defaults: Defaults{Env: cfg.Config.Env, WorkingDir: cfg.Config.WorkingDir, User: cfg.Config.User,
			Entrypoint: cfg.Config.Entrypoint, Cmd: cfg.Config.Cmd},
		Computer: opts.Computer,
	}
	for _, m := range metas {
		t.Skipped.add(m.Skipped)
	}
	if t.Python, err = findPython(s.RootDir(t), t.Defaults.Env); err != nil {
		return Template{}, err
	}
	if t.Python != "" {
		if t.Kernel, err = hasKernel(s.RootDir(t)); err != nil {
			return Template{}, err
		}
	}
	if err := s.writeMeta(t, opts.Replace); err != nil {
		return Template{}, err
	}
	return t, nil
}

// storeImageLayers checks img's config and makes sure its layers are
// unpacked in the store, within the limits.
func (s *Store) storeImageLayers(ctx context.Context, img v1.Image, src Source, progress func(Progress)) (*v1.ConfigFile, string, []layerMeta, error) {
	cfg, id, err := checkedConfig(img, src)
	if err != nil {
		return nil, "", nil, err
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, "", nil, errf(ErrCorrupt, "reading the image's layers: %v", err)
	}
	diffIDs := cfg.RootFS.DiffIDs
	if len(layers) != len(diffIDs) {
		return nil, "", nil, errf(ErrCorrupt, "the image has %d layers but its config lists %d diff_ids: the image is corrupted", len(layers), len(diffIDs))
	}
	b := &budget{limits: s.limits}
	metas := make([]layerMeta, len(layers))
	for i, l := range layers {
		step := layerStep{n: i + 1, of: len(layers), diffID: diffIDs[i].String(), progress: progress}
		if metas[i], err = s.layer(ctx, l, step, b); err != nil {
			return nil, "", nil, err
		}
	}
	return cfg, id, metas, nil
}

// checkedConfig parses the image's config and checks it against the
// manifest's config digest (except for docker archives, whose manifest
// go-containerregistry would compute by compressing every layer).
func checkedConfig(img v1.Image, src Source) (*v1.ConfigFile, string, error) {
	raw, err := img.RawConfigFile()
	if err != nil {
		return nil, "", errf(ErrCorrupt, "reading the image's config: %v", err)
	}
	id := fmt.Sprintf("sha256:%x", sha256.Sum256(raw))
	if src.Kind != kindDocker && src.Kind != kindBuild {
		m, err := img.Manifest()
		if err != nil {
			return nil, "", errf(ErrCorrupt, "reading the image's manifest: %v", err)
		}
		if m.Config.Digest.String() != id {
			return nil, "", errf(ErrCorrupt, "the image's config is %s but its manifest says %s: the image is corrupted", short(id), short(m.Config.Digest.String()))
		}
	}
	cfg, err := v1.ParseConfigFile(bytes.NewReader(raw))
	if err != nil {
		return nil, "", errf(ErrCorrupt, "the image's config is not valid: %v", err)
	}
	if cfg.OS != "" && cfg.OS != "linux" {
		return nil, "", errf(ErrInvalid, "the image is for %s, not linux", cfg.OS)
	}
	return cfg, id, nil
}

// layerStep names one layer of an import in progress and messages.
type layerStep struct {
	n, of    int
	diffID   string
	progress func(Progress)
}

func (l layerStep) String() string {
	return fmt.Sprintf("layer %d/%d (%s)", l.n, l.of, short(l.diffID))
}

func (l layerStep) report(state string, bytes, files int64) {
	l.progress(Progress{Step: "layer", Layer: l.n, Layers: l.of, Digest: l.diffID, State: state, Bytes: bytes, Files: files})
}

// layer makes sure the layer is unpacked in the store, counting it
// against the budget either way.
func (s *Store) layer(ctx context.Context, l v1.Layer, step layerStep, b *budget) (layerMeta, error) {
	unlock, err := lockFile(ctx, filepath.Join(s.dir, "locks", "layer-"+hexOf(step.diffID)), false)
	if err != nil {
		return layerMeta{}, err
	}
	defer unlock()
	var m layerMeta
	err = readJSON(filepath.Join(s.layerPath(step.diffID), "layer.json"), &m)
	if err == nil {
		if err := b.addBytes(m.Bytes); err != nil {
			return m, err
		}
		if err := b.addFiles(m.Entries); err != nil {
			return m, err
		}
		step.report("present", m.Bytes, m.Entries)
		return m, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return m, err
	}
	tmp, err := s.tempDir("layer-")
	if err != nil {
		return m, err
	}
	defer os.RemoveAll(tmp)
	if m, err = unpackLayer(ctx, l, filepath.Join(tmp, "tree"), step, b); err != nil {
		return m, err
	}
	if err := writeJSON(filepath.Join(tmp, "layer.json"), m); err != nil {
		return m, err
	}
	if err := os.Rename(tmp, s.layerPath(step.diffID)); err != nil {
		return m, fmt.Errorf("storing %s: %w", step, err)
	}
	step.report("done", m.Bytes, m.Entries)
	return m, nil
}

// chainID is the OCI chain id of diffIDs.
func chainID(diffIDs []string) string {
	chain := ""
	for i, d := range diffIDs {
		if i == 0 {
			chain = d
			continue
		}
		chain = fmt.Sprintf("sha256:%x", sha256.Sum256([]byte(chain+" "+d)))
	}
	if chain == "" {
		chain = fmt.Sprintf("sha256:%x", sha256.Sum256(nil))
	}
	return chain
}

// root makes sure the flattened root of the layers exists.
func (s *Store) root(ctx context.Context, layers []layerMeta, progress func(Progress)) (rootMeta, error) {
	ids := make([]string, len(layers))
	for i, l := range layers {
		ids[i] = l.DiffID
	}
	chain := chainID(ids)
	unlock, err := lockFile(ctx, filepath.Join(s.dir, "locks", "root-"+hexOf(chain)), false)
	if err != nil {
		return rootMeta{}, err
	}
	defer unlock()
	var rm rootMeta
	if err := readJSON(filepath.Join(s.rootPath(chain), "root.json"), &rm); err == nil {
		progress(Progress{Step: "root", Digest: chain, State: "present", Bytes: rm.Size, Files: rm.Files})
		return rm, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return rm, err
	}
	tmp, err := s.tempDir("root-")
	if err != nil {
		return rm, err
	}
	defer os.RemoveAll(tmp)
	trees := make([]string, len(layers))
	for i, l := range layers {
		trees[i] = filepath.Join(s.layerPath(l.DiffID), "tree")
	}
	rm, err = flatten(ctx, trees, layers, filepath.Join(tmp, "rootfs"))
	if err != nil {
		return rm, err
	}
	rm.ChainID, rm.Layers = chain, ids
	if err := writeJSON(filepath.Join(tmp, "root.json"), rm); err != nil {
		return rm, err
	}
	progress(Progress{Step: "image", Digest: chain, State: "writing"})
	if err := makeImage(ctx, tmp); err != nil {
		return rm, err
	}
	if fi, err := os.Stat(filepath.Join(tmp, imageFile)); err == nil {
		progress(Progress{Step: "image", Digest: chain, State: "done", Bytes: fi.Size()})
	}
	if err := os.Rename(tmp, s.rootPath(chain)); err != nil {
		return rm, fmt.Errorf("storing root %s: %w", short(chain), err)
	}
	progress(Progress{Step: "root", Digest: chain, State: "done", Bytes: rm.Size, Files: rm.Files})
	return rm, nil
}
