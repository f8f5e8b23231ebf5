//go:build linux

package disk

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// discardDir is where images wait for their unlink, under the templates'
// directory (the same filesystem as the computers' directories).
const discardDir = "discarded"

// Discard removes the image at path. Unlinking an image frees every block
// Create reserved (1–3 ms for a GiB on ext4), so it is done after Discard
// returns: the image is renamed into the discard directory, and one
// goroutine unlinks what is there. A Create that finds no room waits for
// the pending unlinks and tries once more. When the rename is impossible
// (another filesystem), the image is unlinked at once.
func (t *Templates) Discard(path string) error {
	dir := filepath.Join(t.dir, discardDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return t.removeNow(path)
	}
	var b [8]byte
	rand.Read(b[:])
	to := filepath.Join(dir, fmt.Sprintf("%x.img", b))
	if err := os.Rename(path, to); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return t.removeNow(path)
	}
	t.discard.Lock()
	t.discardQueue = append(t.discardQueue, to)
	if !t.discarding {
		t.discarding = true
		t.discarded = make(chan struct{})
		go t.unlinkDiscarded()
	}
	t.discard.Unlock()
	return nil
}

func (t *Templates) removeNow(path string) error {
	if err := t.unlink(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove disk image: %w", err)
	}
	return nil
}

// unlinkDiscarded empties the queue, then says so to those waiting.
func (t *Templates) unlinkDiscarded() {
	for {
		t.discard.Lock()
		if len(t.discardQueue) == 0 {
			t.discarding = false
			close(t.discarded)
			t.discard.Unlock()
			return
		}
		path := t.discardQueue[0]
		t.discardQueue = t.discardQueue[1:]
		t.discard.Unlock()
		t.unlink(path)
	}
}

// AwaitDiscards waits until the images discarded so far are unlinked (or
// ctx ends).
func (t *Templates) AwaitDiscards(ctx context.Context) { t.awaitDiscards(ctx) }

// awaitDiscards waits until no discarded image is left to unlink (or ctx
// ends). It reports whether any was pending.
func (t *Templates) awaitDiscards(ctx context.Context) bool {
	t.discard.Lock()
	pending, done := t.discarding, t.discarded
	t.discard.Unlock()
	if !pending {
		return false
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
	return true
}

// RemoveDiscarded unlinks the images a process that ended left in the
// discard directory (those of this process are unlinked anyway). It returns
// how many it removed.
func (t *Templates) RemoveDiscarded() (int, error) {
	ents, err := os.ReadDir(filepath.Join(t.dir, discardDir))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("list discarded disk images: %w", err)
	}
	n := 0
	for _, e := range ents {
		err := t.unlink(filepath.Join(t.dir, discardDir, e.Name()))
		if err == nil {
			n++
		} else if !errors.Is(err, os.ErrNotExist) {
			return n, fmt.Errorf("remove discarded disk image: %w", err)
		}
	}
	return n, nil
}

// isNoSpace reports whether err is the host's lack of room.
func isNoSpace(err error) bool { return errors.Is(err, unix.ENOSPC) }
