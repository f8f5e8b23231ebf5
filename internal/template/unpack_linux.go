package template

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"path"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"
)

// progressEvery is how often (in uncompressed bytes) a layer being unpacked
// reports its progress.
const progressEvery = 16 << 20

// unpackLayer unpacks l's uncompressed tar into dir (which must not exist),
// checking the stream against the layer's diff_id and the budget.
func unpackLayer(ctx context.Context, l v1.Layer, dir string, step layerStep, b *budget) (layerMeta, error) {
	m := layerMeta{DiffID: step.diffID}
	rc, err := l.Uncompressed()
	if err != nil {
		return m, errf(ErrCorrupt, "%s: opening it: %v", step, err)
	}
	defer rc.Close()
	t, err := newTree(dir)
	if err != nil {
		return m, err
	}
	defer t.close()
	u := &unpacker{t: t, m: &m, seen: map[string]bool{}}
	cr := &countingReader{r: rc, h: sha256.New(), b: b, step: step, entries: &m.Entries, next: progressEvery}
	if err := u.all(ctx, tar.NewReader(cr), cr); err != nil {
		return m, err
	}
	if err := t.finish(); err != nil {
		return m, err
	}
	if got := fmt.Sprintf("sha256:%x", cr.h.Sum(nil)); got != step.diffID {
		return m, errf(ErrCorrupt, "%s: its content has digest %s, not the one the image names: the layer is corrupted or was altered; get the image again", step, short(got))
	}
	m.Bytes = cr.n
	for d := range t.implicit {
		m.Implicit = append(m.Implicit, d)
	}
	sort.Strings(m.Implicit)
	return m, nil
}

type unpacker struct {
	t    *tree
	m    *layerMeta
	seen map[string]bool // entries of this layer so far: is a directory
}

// all unpacks every entry, then reads the rest of the stream (which the
// digest covers).
func (u *unpacker) all(ctx context.Context, tr *tar.Reader, cr *countingReader) error {
	step := cr.step
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if errors.Is(err, tar.ErrInsecurePath) { // with GODEBUG=tarinsecurepath=0; cleanName decides
			err = nil
		}
		if err != nil {
			return cr.readErr(err)
		}
		u.m.Entries++
		if err := cr.b.addFiles(1); err != nil {
			return err
		}
		if err := u.entry(hdr, tr); err != nil {
			if cr.err != nil {
				return cr.readErr(cr.err)
			}
			return within(err, "%s: entry %q", step, hdr.Name)
		}
	}
	if _, err := io.Copy(io.Discard, cr); err != nil {
		return cr.readErr(err)
	}
	return nil
}

func (u *unpacker) entry(hdr *tar.Header, r io.Reader) error {
	name, err := cleanName(hdr.Name)
	if err != nil {
		return err
	}
	if base := path.Base(name); strings.HasPrefix(base, ".wh.") {
		return u.whiteout(name, base)
	}
	if name == "." {
		if hdr.Typeflag == tar.TypeDir {
			return nil // the root is always 0755, owned by root
		}
		return errf(ErrInvalid, "names the root but is not a directory")
	}
	m, err := metaOf(hdr)
	if err != nil {
		return err
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		u.seen[name] = true
		return u.t.mkdir(name, m)
	case tar.TypeReg, tar.TypeCont, tar.TypeGNUSparse:
		u.seen[name] = false
		return u.t.file(name, m, r)
	case tar.TypeSymlink:
		if hdr.Linkname == "" {
			return errf(ErrInvalid, "is a symbolic link to nothing")
		}
		u.seen[name] = false
		return u.t.symlink(name, hdr.Linkname, m)
	case tar.TypeLink:
		return u.hardlink(name, hdr.Linkname)
	case tar.TypeChar, tar.TypeBlock:
		u.m.Skipped.Devices++
		return nil
	case tar.TypeFifo:
		u.m.Skipped.FIFOs++
		return nil
	case tar.TypeXGlobalHeader:
		return nil
	}
	return errf(ErrInvalid, "has tar type %q, which templates do not support", hdr.Typeflag)
}

// whiteout records a whiteout (".wh.NAME": NAME of the lower layers is
// deleted) or an opaque directory (".wh..wh..opq": the lower layers'
// content of the directory is hidden); other ".wh..wh." names are aufs
// bookkeeping and ignored.
func (u *unpacker) whiteout(name, base string) error {
	dir := path.Dir(name)
	switch {
	case base == ".wh..wh..opq":
		u.m.Opaque = append(u.m.Opaque, dir)
		if dir == "." {
			return nil
		}
		_, _, err := u.t.parent(dir+"/x", true) // the directory itself stays
		return err
	case strings.HasPrefix(base, ".wh..wh."):
		return nil
	case base == ".wh.":
		return errf(ErrInvalid, "is a whiteout of nothing")
	}
	u.m.Whiteouts = append(u.m.Whiteouts, path.Join(dir, strings.TrimPrefix(base, ".wh.")))
	return nil
}

func (u *unpacker) hardlink(name, linkname string) error {
	target, err := cleanName(linkname)
	if err != nil {
		return within(err, "hard link target")
	}
	isDir, ok := u.seen[target]
	switch {
	case !ok:
		return errf(ErrUnsafe, "is a hard link to %q, which is not an earlier entry of the same layer (hard links may not reach outside their layer)", linkname)
	case isDir:
		return errf(ErrInvalid, "is a hard link to a directory")
	case target == name:
		return nil
	}
	u.seen[name] = false
	return u.t.linkFrom(u.t, target, name)
}

// cleanName makes a tar name relative and clean; a leading "/" is
// dropped, a ".." that would climb above the root refuses the entry.
func cleanName(n string) (string, error) {
	depth := 0
	for _, c := range strings.Split(n, "/") {
		switch c {
		case "", ".":
		case "..":
			if depth--; depth < 0 {
				return "", errf(ErrUnsafe, "path %q leaves the root", n)
			}
		default:
			depth++
		}
	}
	if c := strings.TrimPrefix(path.Clean("/"+n), "/"); c != "" {
		return c, nil
	}
	return ".", nil
}

// metaOf is what an entry keeps of its header: setuid and setgid are
// stripped, numeric owners kept.
func metaOf(h *tar.Header) (meta, error) {
	const maxID = 1<<32 - 2
	if h.Uid < 0 || h.Uid > maxID || h.Gid < 0 || h.Gid > maxID {
		return meta{}, errf(ErrInvalid, "has owner %d:%d, out of range", h.Uid, h.Gid)
	}
	mode := uint32(h.Mode) & 0o7777 &^ (unix.S_ISUID | unix.S_ISGID)
	return meta{uid: h.Uid, gid: h.Gid, mode: mode, mtime: h.ModTime}, nil
}

// countingReader hashes and counts the uncompressed stream, charging it
// to the budget and reporting progress.
type countingReader struct {
	r       io.Reader
	h       hash.Hash
	b       *budget
	step    layerStep
	entries *int64
	n, next int64
	err     error // the first read error, or the budget's
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.h.Write(p[:n])
	c.n += int64(n)
	if berr := c.b.addBytes(int64(n)); berr != nil {
		err = berr
	}
	if c.n >= c.next {
		c.step.report("unpacking", c.n, *c.entries)
		c.next = c.n + progressEvery
	}
	if err != nil && err != io.EOF && c.err == nil {
		c.err = err
	}
	return n, err
}

// readErr explains a failure to read the layer's stream.
func (c *countingReader) readErr(err error) error {
	if c.err != nil {
		err = c.err
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return errf(ErrCorrupt, "%s: reading it: %v: the layer is corrupted or truncated", c.step, err)
}
