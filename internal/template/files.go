package template

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// writeFilesTar writes the layer of a build's files to out: each source
// tree at its destination, owned by root, without setuid and setgid bits,
// symbolic links as links. Parent directories of a destination are not
// listed (an unpack makes them, without changing a lower layer's).
func writeFilesTar(out string, files []FileSpec) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	for _, fsp := range files {
		if err := addTree(tw, fsp.Src, strings.TrimPrefix(fsp.Dst, "/")); err != nil {
			f.Close()
			return err
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// addTree adds the tree at src (not following its links) under the name dst.
func addTree(tw *tar.Writer, src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		name := path.Join(dst, filepath.ToSlash(rel))
		fi, err := d.Info()
		if err != nil {
			return err
		}
		// Permission bits and the sticky bit: setuid and setgid are dropped.
		hdr := &tar.Header{Name: name, Mode: int64(fi.Mode().Perm()), ModTime: fi.ModTime(), Format: tar.FormatPAX}
		if fi.Mode()&fs.ModeSticky != 0 {
			hdr.Mode |= 0o1000
		}
		switch {
		case fi.IsDir():
			hdr.Typeflag, hdr.Name = tar.TypeDir, name+"/"
		case fi.Mode().IsRegular():
			hdr.Typeflag, hdr.Size = tar.TypeReg, fi.Size()
		case fi.Mode()&fs.ModeSymlink != 0:
			if hdr.Linkname, err = os.Readlink(p); err != nil {
				return err
			}
			hdr.Typeflag = tar.TypeSymlink
		default:
			return fmt.Errorf("%s is not a file, directory or symbolic link", p)
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag != tar.TypeReg {
			return nil
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		_, err = io.CopyN(tw, in, hdr.Size)
		return err
	})
}
