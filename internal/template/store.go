package template

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Store is the template store of one data directory.
type Store struct {
	dir    string
	limits Limits
}

// Open opens (creating it, mode 0700) the store in dir, usually
// <data>/templates.
func Open(dir string, limits Limits) (*Store, error) {
	if limits.MaxBytes <= 0 || limits.MaxFiles <= 0 {
		return nil, fmt.Errorf("template store: limits must be positive, got %+v", limits)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("template store: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("template store: %w", err)
	}
	for _, sub := range []string{"layers", "roots", "meta", "tmp", "locks"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return nil, fmt.Errorf("template store: %w", err)
		}
	}
	return &Store{dir: dir, limits: limits}, nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// RootDir is the read-only root directory of a template: the one directory
// a computer binds.
func (s *Store) RootDir(t Template) string { return filepath.Join(s.rootPath(t.Root), "rootfs") }

func (s *Store) layerPath(diffID string) string {
	return filepath.Join(s.dir, "layers", hexOf(diffID))
}

func (s *Store) rootPath(chainID string) string {
	return filepath.Join(s.dir, "roots", hexOf(chainID))
}

func (s *Store) metaPath(name string) string { return filepath.Join(s.dir, "meta", name+".json") }

// hexOf is a digest's hex part ("sha256:ab…" → "ab…").
func hexOf(d string) string { _, h, _ := strings.Cut(d, ":"); return h }

// tempDir makes a fresh directory under tmp/, renamed into place when complete.
func (s *Store) tempDir(prefix string) (string, error) {
	return os.MkdirTemp(filepath.Join(s.dir, "tmp"), prefix)
}

// Get returns the template called name.
func (s *Store) Get(ctx context.Context, name string) (Template, error) {
	if err := CheckName(name); err != nil {
		return Template{}, err
	}
	var t Template
	err := readJSON(s.metaPath(name), &t)
	if errors.Is(err, fs.ErrNotExist) {
		return t, errf(ErrNotFound, "no template %q (see 'cubicle template list')", name)
	}
	return t, err
}

// List returns every template, by name.
func (s *Store) List(ctx context.Context) ([]Template, error) {
	ents, err := os.ReadDir(filepath.Join(s.dir, "meta"))
	if err != nil {
		return nil, fmt.Errorf("template store: %w", err)
	}
	out := []Template{}
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || CheckName(name) != nil {
			continue
		}
		t, err := s.Get(ctx, name)
		if errors.Is(err, ErrNotFound) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Remove deletes the template called name, then collects the layers and
// roots no template uses any more.
func (s *Store) Remove(ctx context.Context, name string) (GCReport, error) {
	if err := CheckName(name); err != nil {
		return GCReport{}, err
	}
	if err := os.Remove(s.metaPath(name)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return GCReport{}, errf(ErrNotFound, "no template %q (see 'cubicle template list')", name)
		}
		return GCReport{}, fmt.Errorf("removing template %q: %w", name, err)
	}
	return s.GC(ctx)
}

// writeMeta stores t atomically; without replace, an existing template of
// the same name is an error (checked atomically by link(2)).
func (s *Store) writeMeta(t Template, replace bool) error {
	tmp, err := writeTempJSON(filepath.Join(s.dir, "tmp"), t)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if replace {
		return os.Rename(tmp, s.metaPath(t.Name))
	}
	if err := os.Link(tmp, s.metaPath(t.Name)); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return existsErr(t.Name)
		}
		return fmt.Errorf("storing template %q: %w", t.Name, err)
	}
	return nil
}

func existsErr(name string) error {
	return errf(ErrExists, "template %q exists; remove it first ('cubicle template rm %s') or pass --replace", name, name)
}

// writeJSON writes v to path atomically (a temporary file in the same
// directory, synced, renamed).
func writeJSON(path string, v any) error {
	tmp, err := writeTempJSON(filepath.Dir(path), v)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

func writeTempJSON(dir string, v any) (string, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp(dir, ".json-")
	if err != nil {
		return "", err
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// imageFile is a root's EROFS image, next to its rootfs/.
const imageFile = "root.erofs"

// Image returns the path of the template's image, the file a computer's
// root is mounted from, making it first when the template's root has none
// yet (roots stored before images existed). It takes the store's shared
// lock, so GC does not collect the root meanwhile.
func (s *Store) Image(ctx context.Context, t Template) (string, error) {
	dir := s.rootPath(t.Root)
	img := filepath.Join(dir, imageFile)
	if _, err := os.Stat(img); err == nil {
		return img, nil
	}
	unlockStore, err := lockFile(ctx, filepath.Join(s.dir, "lock"), true)
	if err != nil {
		return "", err
	}
	defer unlockStore()
	unlock, err := lockFile(ctx, filepath.Join(s.dir, "locks", "root-"+hexOf(t.Root)), false)
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(img); err == nil {
		return img, nil
	}
	if _, err := os.Stat(filepath.Join(dir, "rootfs")); err != nil {
		return "", fmt.Errorf("template %s: its root %s is missing from the store (import it again): %w", t.Name, short(t.Root), err)
	}
	if err := makeImage(ctx, dir); err != nil {
		return "", fmt.Errorf("template %s: %w", t.Name, err)
	}
	return img, nil
}
