package blob

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
)

func TestPutOpenDelete(t *testing.T) {
	ctx := context.Background()
	d, err := NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	n, sum, err := d.Put(ctx, "files/file_1", strings.NewReader("hello"), 5)
	if err != nil || n != 5 {
		t.Fatalf("put: %d %v", n, err)
	}
	want := sha256.Sum256([]byte("hello"))
	if sum != hex.EncodeToString(want[:]) {
		t.Fatalf("sha256 %s", sum)
	}
	rc, size, err := d.Open(ctx, "files/file_1")
	if err != nil || size != 5 {
		t.Fatalf("open: %d %v", size, err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "hello" {
		t.Fatalf("content %q", b)
	}
	if err := d.Delete(ctx, "files/file_1"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Open(ctx, "files/file_1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	if err := d.Delete(ctx, "files/file_1"); err != nil {
		t.Fatalf("second delete: %v", err)
	}
}

func TestLimitLeavesNothing(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	d, _ := NewDir(root)
	// An existing object survives a failed replacement.
	if _, _, err := d.Put(ctx, "a/x", strings.NewReader("old"), 10); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Put(ctx, "a/x", strings.NewReader("0123456789A"), 10); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("over limit: %v", err)
	}
	if _, _, err := d.Put(ctx, "a/y", strings.NewReader("0123456789A"), 10); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("over limit: %v", err)
	}
	ents, _ := os.ReadDir(root + "/a")
	if len(ents) != 1 || ents[0].Name() != "x" {
		t.Fatalf("left behind: %v", ents)
	}
	rc, _, err := d.Open(ctx, "a/x")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "old" {
		t.Fatalf("replaced by a failed put: %q", b)
	}
	// Exactly at the limit is fine.
	if n, _, err := d.Put(ctx, "a/z", strings.NewReader("0123456789"), 10); err != nil || n != 10 {
		t.Fatalf("at limit: %d %v", n, err)
	}
}

type failingReader struct{ n int }

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n > 0 {
		f.n--
		return copy(p, "data"), nil
	}
	return 0, errors.New("broken stream")
}

func TestBrokenStreamLeavesNothing(t *testing.T) {
	root := t.TempDir()
	d, _ := NewDir(root)
	if _, _, err := d.Put(context.Background(), "k", &failingReader{n: 3}, 100); err == nil {
		t.Fatal("no error")
	}
	ents, _ := os.ReadDir(root)
	if len(ents) != 0 {
		t.Fatalf("left behind: %v", ents)
	}
}

func TestBadKeys(t *testing.T) {
	d, _ := NewDir(t.TempDir())
	ctx := context.Background()
	for _, k := range []string{"", "..", "../x", "a/../b", "/abs", "a//b", "a/", ".", "a/./b", "a\x00b", "a b", "a\\b", strings.Repeat("a", 201)} {
		if _, _, err := d.Put(ctx, k, strings.NewReader("x"), 10); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("put %q: %v", k, err)
		}
		if _, _, err := d.Open(ctx, k); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("open %q: %v", k, err)
		}
		if err := d.Delete(ctx, k); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("delete %q: %v", k, err)
		}
	}
}
