//go:build linux

package disk

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

const (
	mib     = 1 << 20
	minSize = 16 * mib

	// templateVersion is part of template file names; bump it when the mkfs
	// options change so old caches are ignored rather than reused.
	templateVersion = "v2"
)

// mkfsArgs are the mkfs.ext4 options for every template. No journal keeps
// the template tiny and sparse. The inode tables are zeroed now
// (lazy_itable_init=0), by discarding, which on a file punches holes, so
// the template stays sparse and no group is left for the kernel's lazy
// init: that zeroes inode tables through the loop device, which punches
// holes in the image and would hand part of a disk's reserved space back
// to the host (see Create). root_owner because mke2fs would otherwise give
// the root directory to whoever ran it.
var mkfsArgs = []string{
	"-q", "-F",
	"-O", "^has_journal",
	"-E", "lazy_itable_init=0,lazy_journal_init=1,discard,root_owner=0:0",
	"-m", "0",
	"-b", "4096",
}

// Templates caches one freshly formatted image per size under dir, so
// creating a disk is a sparse copy, not a mkfs. Safe for concurrent use,
// also across processes sharing dir.
type Templates struct {
	dir      string
	mkfsRuns atomic.Int64 // for tests: how many templates were built
	unlink   func(string) error

	discard      sync.Mutex
	discardQueue []string      // renamed into the discard directory, not yet unlinked
	discarding   bool          // an unlinkDiscarded goroutine runs
	discarded    chan struct{} // closed when that goroutine has emptied the queue
}

// NewTemplates returns a cache of ext4 templates kept in dir (created on
// first use).
func NewTemplates(dir string) *Templates { return &Templates{dir: dir, unlink: os.Remove} }

// Create makes path a new ext4 image of sizeBytes rounded up to a MiB
// (at least 16 MiB). path must not exist yet. The image is a sparse copy of
// the cached template for that size whose every block is then reserved on
// the host (fallocate): a disk whose image were sparse could be admitted
// beyond the host's free space, and would then fail with I/O errors
// inside while its df showed free space. With no room for the whole image,
// Create fails with ENOSPC and leaves nothing; but first, when images this
// process discarded are still being unlinked, it waits for them and tries
// once more.
func (t *Templates) Create(ctx context.Context, path string, sizeBytes int64) error {
	err := t.create(ctx, path, sizeBytes)
	if isNoSpace(err) && t.awaitDiscards(ctx) {
		err = t.create(ctx, path, sizeBytes) // the discarded images' room is back
	}
	return err
}

func (t *Templates) create(ctx context.Context, path string, sizeBytes int64) error {
	if sizeBytes < minSize {
		return fmt.Errorf("create disk image %s: size %d bytes is below the 16 MiB minimum", path, sizeBytes)
	}
	size := (sizeBytes + mib - 1) / mib * mib
	tpl, err := t.template(ctx, size)
	if err != nil {
		return fmt.Errorf("create disk image %s: %w", path, err)
	}
	src, err := os.Open(tpl)
	if err != nil {
		return fmt.Errorf("create disk image %s: open template: %w", path, err)
	}
	defer src.Close()
	// O_EXCL: never clobber an existing sandbox's disk.
	dst, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create disk image: %w (remove the old image first)", err)
	}
	if err != nil {
		return fmt.Errorf("create disk image: %w", err)
	}
	err = copySparse(dst, src, size)
	if err == nil {
		err = reserve(dst, size)
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("create disk image %s: %w", path, err)
	}
	return nil
}

// template returns the path of the formatted template of size bytes,
// building it first if no process has yet.
func (t *Templates) template(ctx context.Context, size int64) (string, error) {
	name := fmt.Sprintf("ext4-%s-%dMiB.img", templateVersion, size/mib)
	path := filepath.Join(t.dir, name)
	if templateOK(path, size) {
		return path, nil
	}
	if err := os.MkdirAll(t.dir, 0o700); err != nil {
		return "", fmt.Errorf("make template directory: %w", err)
	}
	unlock, err := lockFile(ctx, filepath.Join(t.dir, "."+name+".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	// Someone else may have built it while we waited for the lock.
	if templateOK(path, size) {
		return path, nil
	}
	// Holding the lock, any temp file for this size is a crashed build's.
	if old, _ := filepath.Glob(filepath.Join(t.dir, "."+name+".tmp-*")); old != nil {
		for _, o := range old {
			os.Remove(o)
		}
	}
	if err := t.build(ctx, path, name, size); err != nil {
		return "", err
	}
	return path, nil
}

func templateOK(path string, size int64) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Size() == size
}

// build formats a temp file and renames it into place, so a template at
// its final name is always complete.
func (t *Templates) build(ctx context.Context, path, name string, size int64) error {
	mkfs, err := findMkfs()
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(t.dir, "."+name+".tmp-*")
	if err != nil {
		return fmt.Errorf("build template: %w", err)
	}
	tmp := f.Name()
	defer func() {
		f.Close()
		os.Remove(tmp) // no-op after the rename
	}()
	if err := f.Truncate(size); err != nil {
		return fmt.Errorf("build template: size %s: %w", tmp, err)
	}
	t.mkfsRuns.Add(1)
	out, err := exec.CommandContext(ctx, mkfs, append(mkfsArgs, tmp)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("build template: %s failed: %w: %s", mkfs, err, strings.TrimSpace(string(out)))
	}
	// Every image is copied from the template, so make sure it is on disk
	// before it gets its final name.
	if err := f.Sync(); err != nil {
		return fmt.Errorf("build template: sync: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("build template: %w", err)
	}
	if d, err := os.Open(t.dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

func findMkfs() (string, error) {
	for _, p := range []string{"/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"} {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	if p, err := exec.LookPath("mkfs.ext4"); err == nil {
		return p, nil
	}
	return "", errors.New("mkfs.ext4 not found: install e2fsprogs (apt-get install e2fsprogs)")
}

// lockFile takes an exclusive flock on path, polling so that ctx can cancel
// the wait. flock (not a mutex) because other processes share the cache;
// each call opens its own file description, so it also excludes goroutines.
func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open template lock: %w", err)
	}
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { unix.Close(fd) }, nil // closing releases the lock
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			unix.Close(fd)
			return nil, fmt.Errorf("lock template %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			unix.Close(fd)
			return nil, fmt.Errorf("wait for template lock: %w", ctx.Err())
		case <-time.After(delay):
		}
	}
}
