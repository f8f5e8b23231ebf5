package template

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"sort"
	"time"

	"golang.org/x/sys/unix"
)

// mnode is one path of the merged view of layers: which layer provides it.
type mnode struct {
	layer    int
	dir      bool
	explicit bool // the layer listed the directory (not implicit)
	kids     map[string]*mnode
}

func newDir(layer int, explicit bool) *mnode {
	return &mnode{layer: layer, dir: true, explicit: explicit, kids: map[string]*mnode{}}
}

// find returns the node of a clean relative path, nil if there is none.
func (n *mnode) find(p string) *mnode {
	if p == "." {
		return n
	}
	for dir, rest := n, p; ; {
		elem, more, found := cut(rest)
		c := dir.kids[elem]
		if c == nil || !found {
			return c
		}
		if !c.dir {
			return nil
		}
		dir, rest = c, more
	}
}

func cut(p string) (string, string, bool) {
	for i := 0; i < len(p); i++ {
		if p[i] == '/' {
			return p[:i], p[i+1:], true
		}
	}
	return p, "", false
}

// flatten builds the root of the layers (trees lowest first, with their
// metadata) in out: directories are made, every other entry is a hard link
// to the layer's own, so no file is copied.
func flatten(ctx context.Context, trees []string, metas []layerMeta, out string) (rootMeta, error) {
	var rm rootMeta
	root := newDir(-1, true)
	srcs := make([]*tree, len(trees))
	for i, dir := range trees {
		t, err := openTree(dir)
		if err != nil {
			return rm, err
		}
		defer t.close()
		srcs[i] = t
		if err := merge(root, i, dir, metas[i]); err != nil {
			return rm, fmt.Errorf("merging layer %d (%s): %w", i+1, short(metas[i].DiffID), err)
		}
	}
	dst, err := newTree(out)
	if err != nil {
		return rm, err
	}
	defer dst.close()
	b := builder{ctx: ctx, srcs: srcs, dst: dst, rm: &rm, inodes: map[[2]uint64]bool{}}
	if err := b.dir(root, "."); err != nil {
		return rm, err
	}
	return rm, dst.finish()
}

// merge lays layer i over the merged view: its opaque directories and
// whiteouts hide what the lower layers have, then its entries replace the
// lower ones (a directory over a directory merges with it).
func merge(root *mnode, i int, dir string, m layerMeta) error {
	for _, d := range m.Opaque {
		if n := root.find(d); n != nil && n.dir {
			n.kids = map[string]*mnode{}
		}
	}
	for _, w := range m.Whiteouts {
		if p := root.find(path.Dir(w)); p != nil && p.dir {
			delete(p.kids, path.Base(w))
		}
	}
	implicit := map[string]bool{}
	for _, d := range m.Implicit {
		implicit[d] = true
	}
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		parent := root.find(path.Dir(rel))
		if parent == nil || !parent.dir {
			return fmt.Errorf("%q has no directory in the merged view", rel) // cannot happen: parents come first
		}
		base := path.Base(rel)
		if !d.IsDir() {
			parent.kids[base] = &mnode{layer: i}
			return nil
		}
		if c := parent.kids[base]; c != nil && c.dir {
			if !implicit[rel] {
				c.layer, c.explicit = i, true
			}
			return nil
		}
		parent.kids[base] = newDir(i, !implicit[rel])
		return nil
	})
}

// builder makes the merged view in dst.
type builder struct {
	ctx    context.Context
	srcs   []*tree
	dst    *tree
	rm     *rootMeta
	inodes map[[2]uint64]bool
}

func (b *builder) dir(n *mnode, rel string) error {
	names := make([]string, 0, len(n.kids))
	for name := range n.kids {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := b.ctx.Err(); err != nil {
			return err
		}
		c, p := n.kids[name], path.Join(rel, name)
		if err := b.entry(c, p); err != nil {
			return fmt.Errorf("building the root: %q: %w", p, err)
		}
		if c.dir {
			if err := b.dir(c, p); err != nil {
				return err
			}
		}
	}
	return nil
}

func (b *builder) entry(c *mnode, p string) error {
	src := b.srcs[c.layer]
	st, err := src.lstat(p)
	if err != nil {
		return err
	}
	b.rm.Files++
	if c.dir {
		return b.dst.mkdir(p, meta{uid: int(st.Uid), gid: int(st.Gid), mode: st.Mode & 0o7777,
			mtime: time.Unix(st.Mtim.Unix())})
	}
	if st.Mode&unix.S_IFMT == unix.S_IFREG {
		if key := [2]uint64{st.Dev, st.Ino}; !b.inodes[key] {
			b.inodes[key] = true
			b.rm.Size += st.Size
		}
	}
	return b.dst.linkFrom(src, p, p)
}
