package template

import (
	"context"
	"os"
	"path/filepath"
	"strings"
)

// GCReport says what a collection removed.
type GCReport struct {
	Layers int `json:"layers"`
	Roots  int `json:"roots"`
	// Temp counts leftovers of interrupted imports.
	Temp int `json:"temp"`
}

// GC removes the layers and roots no template uses, and what interrupted
// imports left in tmp/. It waits for running imports (it takes the
// store's lock exclusively).
func (s *Store) GC(ctx context.Context) (GCReport, error) {
	var rep GCReport
	unlock, err := lockFile(ctx, filepath.Join(s.dir, "lock"), false)
	if err != nil {
		return rep, err
	}
	defer unlock()
	ts, err := s.List(ctx)
	if err != nil {
		return rep, err
	}
	used := map[string]bool{}
	for _, t := range ts {
		used["roots/"+hexOf(t.Root)] = true
		for _, l := range t.Layers {
			used["layers/"+hexOf(l)] = true
		}
	}
	for _, sub := range []string{"layers", "roots"} {
		n, err := s.sweep(sub, func(name string) bool { return used[sub+"/"+name] })
		if err != nil {
			return rep, err
		}
		if sub == "layers" {
			rep.Layers = n
		} else {
			rep.Roots = n
		}
	}
	if rep.Temp, err = s.sweep("tmp", func(string) bool { return false }); err != nil {
		return rep, err
	}
	// No import holds or waits for a layer or root lock now.
	_, err = s.sweep("locks", func(name string) bool {
		kind, hex, _ := strings.Cut(name, "-")
		return used[map[string]string{"layer": "layers", "root": "roots"}[kind]+"/"+hex]
	})
	return rep, err
}

// sweep removes the entries of a subdirectory that keep says not to keep.
func (s *Store) sweep(sub string, keep func(string) bool) (int, error) {
	ents, err := os.ReadDir(filepath.Join(s.dir, sub))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range ents {
		if keep(e.Name()) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(s.dir, sub, e.Name())); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
