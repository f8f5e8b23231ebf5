//go:build linux

package disk

import (
	"bytes"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// copySparse copies src into dst (both at offset 0) without filling holes,
// then sizes dst to size. A freshly formatted image is almost all holes, so
// this moves well under a MiB per GiB of image.
func copySparse(dst, src *os.File, size int64) error {
	sfd, dfd := int(src.Fd()), int(dst.Fd())
	for off := int64(0); off < size; {
		data, err := unix.Seek(sfd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only holes from off to EOF
		}
		if err != nil {
			return fmt.Errorf("find data in template: %w", err)
		}
		hole, err := unix.Seek(sfd, data, unix.SEEK_HOLE)
		if err != nil {
			return fmt.Errorf("find hole in template: %w", err)
		}
		hole = min(hole, size)
		if err := copyRange(dfd, sfd, data, hole-data); err != nil {
			return err
		}
		off = hole
	}
	// Trailing holes are not copied, so the size has to be set explicitly.
	if err := unix.Ftruncate(dfd, size); err != nil {
		return fmt.Errorf("size image to %d bytes: %w", size, err)
	}
	return nil
}

// reserve allocates every block of f's first size bytes on the host, the
// holes as unwritten extents (read as zeros, no data written).
func reserve(f *os.File, size int64) error {
	for {
		err := unix.Fallocate(int(f.Fd()), 0, 0, size)
		if !errors.Is(err, unix.EINTR) {
			if err != nil {
				return fmt.Errorf("reserve %d MiB of host disk for the image: %w", size>>20, err)
			}
			return nil
		}
	}
}

// copyRange copies n bytes at off from sfd to dfd at the same offset,
// in the kernel when it can.
func copyRange(dfd, sfd int, off, n int64) error {
	roff, woff := off, off
	for n > 0 {
		c, err := unix.CopyFileRange(sfd, &roff, dfd, &woff, int(min(n, 1<<30)), 0)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EXDEV), errors.Is(err, unix.ENOSYS),
			errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.EINVAL):
			// Different filesystems (or an old kernel): copy by hand.
			return copyRangeSlow(dfd, sfd, roff, n)
		case err != nil:
			return fmt.Errorf("copy template data: %w", err)
		case c == 0:
			return fmt.Errorf("copy template data: template shrank while copying (at offset %d)", roff)
		}
		n -= int64(c)
	}
	return nil
}

// copyRangeSlow is the read/write fallback. It skips all-zero blocks so
// that the copy stays sparse even where SEEK_DATA reported a zero extent
// as data (filesystems without real SEEK_DATA report the whole file as data).
func copyRangeSlow(dfd, sfd int, off, n int64) error {
	const blk = 4096
	buf := make([]byte, 1<<20)
	zero := make([]byte, blk)
	for n > 0 {
		r, err := unix.Pread(sfd, buf[:min(n, int64(len(buf)))], off)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read template: %w", err)
		}
		if r == 0 {
			return fmt.Errorf("read template: unexpected end of file at offset %d", off)
		}
		for i := 0; i < r; i += blk {
			b := buf[i:min(i+blk, r)]
			if bytes.Equal(b, zero[:len(b)]) {
				continue
			}
			if err := pwriteAll(dfd, b, off+int64(i)); err != nil {
				return fmt.Errorf("write image: %w", err)
			}
		}
		off += int64(r)
		n -= int64(r)
	}
	return nil
}

func pwriteAll(fd int, b []byte, off int64) error {
	for len(b) > 0 {
		w, err := unix.Pwrite(fd, b, off)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		b, off = b[w:], off+int64(w)
	}
	return nil
}
