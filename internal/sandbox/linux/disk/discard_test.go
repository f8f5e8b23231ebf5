//go:build linux

package disk

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A discarded image leaves its path at once and is unlinked later; a
// Create that finds no room meanwhile waits for it instead of failing.
func TestDiscardThenCreateOnFullHost(t *testing.T) {
	checkFDs(t)
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=72m,mode=0700"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	tpls := NewTemplates(filepath.Join(dir, "templates"))
	ctx := context.Background()
	a, b := filepath.Join(dir, "a.img"), filepath.Join(dir, "b.img")
	if err := tpls.Create(ctx, a, 48<<20); err != nil {
		t.Fatal(err)
	}
	if err := tpls.Create(ctx, b, 48<<20); !isNoSpace(err) {
		t.Fatalf("a second 48 MiB image on a 72 MiB host: %v, want ENOSPC", err)
	}
	release := make(chan struct{})
	unlinking := make(chan string, 4)
	tpls.unlink = func(p string) error {
		unlinking <- p
		<-release
		return os.Remove(p)
	}
	if err := tpls.Discard(a); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(a); !os.IsNotExist(err) {
		t.Fatalf("the discarded image is still at its path: %v", err)
	}
	held := <-unlinking
	created := make(chan error, 1)
	go func() { created <- tpls.Create(ctx, b, 48<<20) }()
	select {
	case err := <-created:
		t.Fatalf("Create returned while the discarded image still held the room: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	if err := <-created; err != nil {
		t.Fatalf("Create after the discard: %v", err)
	}
	if _, err := os.Stat(held); !os.IsNotExist(err) {
		t.Fatalf("the discarded image was not unlinked: %v", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(tpls.dir, discardDir)); len(ents) != 0 {
		t.Fatalf("left in the discard directory: %v", ents)
	}
}

// Images a process left in the discard directory are removed by
// RemoveDiscarded (the driver's GC).
func TestRemoveDiscarded(t *testing.T) {
	dir := t.TempDir()
	tpls := NewTemplates(dir)
	if n, err := tpls.RemoveDiscarded(); n != 0 || err != nil {
		t.Fatalf("no discard directory: %d, %v", n, err)
	}
	os.MkdirAll(filepath.Join(dir, discardDir), 0o700)
	for _, name := range []string{"1.img", "2.img"} {
		if err := os.WriteFile(filepath.Join(dir, discardDir, name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := tpls.RemoveDiscarded(); n != 2 || err != nil {
		t.Fatalf("RemoveDiscarded: %d, %v; want 2", n, err)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, discardDir)); len(ents) != 0 {
		t.Fatalf("left: %v", ents)
	}
}
