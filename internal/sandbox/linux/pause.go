package linux

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/linux/disk"
)

// A paused computer is its workspace disk image, kept as
// <state>/paused/<id>.img while nothing of the computer runs; Resume moves
// it back into a new computer directory of the same id. The image is
// owned by uid 1000 on disk (the workspace is idmapped), so the resumed
// computer, whatever host uid it gets, sees its files as its own.

// pausedDir is the directory of paused computers' images, under StateDir.
const pausedDir = "paused"

// releaseTimeout bounds the wait for a stopped computer's workspace to be
// unmounted before its image is kept.
const releaseTimeout = 30 * time.Second

var computerID = regexp.MustCompile(`^cmp_[0-9a-f]{24}$`)

func (d *Driver) pausedPath(id string) string {
	return filepath.Join(d.cfg.StateDir, pausedDir, id+".img")
}

// savePaused keeps the image of a computer whose processes are all gone
// as the paused image of id: once its filesystem is unmounted (every
// write is in the image), it is moved and the move made durable.
func (d *Driver) savePaused(ctx context.Context, id, image string) error {
	if _, err := os.Stat(image); errors.Is(err, os.ErrNotExist) {
		return nil // a start that failed before its disk was made
	}
	rctx, cancel := context.WithTimeout(ctx, releaseTimeout)
	defer cancel()
	if err := disk.AwaitReleased(rctx, image); err != nil {
		return fmt.Errorf("pause %s: %w", id, err)
	}
	dir := filepath.Join(d.cfg.StateDir, pausedDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("pause %s: %w", id, err)
	}
	if err := os.Rename(image, d.pausedPath(id)); err != nil {
		return fmt.Errorf("pause %s: keep its disk: %w", id, err)
	}
	return syncDir(dir)
}

// Resume starts the paused computer id again (see sandbox.Resumer).
func (d *Driver) Resume(ctx context.Context, id string, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if !computerID.MatchString(id) {
		return nil, fmt.Errorf("resume %q: %w", id, sandbox.ErrNoPaused)
	}
	st, err := os.Stat(d.pausedPath(id))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("resume %s: %w", id, sandbox.ErrNoPaused)
	}
	if err != nil {
		return nil, fmt.Errorf("resume %s: %w", id, err)
	}
	dir := computerDir(filepath.Join(d.computers, id))
	if _, err := os.Lstat(string(dir)); err == nil {
		return nil, fmt.Errorf("resume %s: the computer is running (its directory %s exists)", id, dir)
	}
	spec.DiskBytes = st.Size()
	return d.create(ctx, id, spec, true)
}

// DiscardPaused removes the paused image of id.
func (d *Driver) DiscardPaused(ctx context.Context, id string) error {
	if !computerID.MatchString(id) {
		return nil
	}
	return d.templates.Discard(d.pausedPath(id))
}

// syncDir makes the entries of dir durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

var (
	_ sandbox.Resumer = (*Driver)(nil)
	_ sandbox.Pauser  = (*computer)(nil)
)
