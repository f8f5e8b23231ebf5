package files

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/blob"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/store"
	"github.com/cubicle-sandbox/cubicle/internal/store/sqlite"
)

func newService(t *testing.T, max int64) (*Service, string) {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	bdir := filepath.Join(dir, "blobs")
	b, err := blob.NewDir(bdir)
	if err != nil {
		t.Fatal(err)
	}
	return New(st, b, Limits{MaxBytes: max}), bdir
}

func principal(org string, caps governance.Capabilities) governance.Principal {
	return governance.Principal{Org: store.Org{ID: org}, Key: store.Key{ID: "key_" + org}, Caps: caps}
}

func TestSanitizeFilename(t *testing.T) {
	for in, want := range map[string]string{
		"a.txt": "a.txt", "dir/sub/b.csv": "b.csv", `C:\x\y.png`: "y.png", "../../etc/passwd": "passwd",
		"résumé.pdf": "résumé.pdf", strings.Repeat("n", 255): strings.Repeat("n", 255),
	} {
		if got, err := SanitizeFilename(in); err != nil || got != want {
			t.Errorf("%q: %q %v", in, got, err)
		}
	}
	for _, in := range []string{"", ".", "..", "a/", "x/..", "a\x00b", "a\nb", "a\x7fb", strings.Repeat("n", 256), "\xff.bin"} {
		if got, err := SanitizeFilename(in); !errors.Is(err, ErrInvalidFilename) {
			t.Errorf("%q: accepted as %q", in, got)
		}
	}
}

func TestFilesLifecycle(t *testing.T) {
	ctx := context.Background()
	s, bdir := newService(t, 10)
	all := governance.AllCapabilities()
	p, other := principal("org_a", all), principal("org_b", all)
	f, err := s.Upload(ctx, p, "dir/notes.txt", "assistants", strings.NewReader("hello"))
	if err != nil || f.Filename != "notes.txt" || f.Bytes != 5 || f.Purpose != "assistants" || !strings.HasPrefix(f.ID, "file_") {
		t.Fatalf("upload: %+v %v", f, err)
	}
	if _, err := s.Upload(ctx, p, "big.bin", "", strings.NewReader("0123456789A")); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("over limit: %v", err)
	}
	ents, _ := os.ReadDir(filepath.Join(bdir, "files"))
	if len(ents) != 1 {
		t.Fatalf("blobs after a refused upload: %v", ents)
	}
	list, err := s.ListFiles(ctx, p)
	if err != nil || len(list) != 1 || list[0].ID != f.ID {
		t.Fatalf("list: %v %v", list, err)
	}
	if l, _ := s.ListFiles(ctx, other); len(l) != 0 {
		t.Fatalf("other org sees %v", l)
	}
	if _, err := s.GetFile(ctx, other, f.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("other org get: %v", err)
	}
	if err := s.DeleteFile(ctx, other, f.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("other org delete: %v", err)
	}
	_, rc, err := s.OpenFile(ctx, p, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "hello" {
		t.Fatalf("content %q", b)
	}
	noFiles := principal("org_a", governance.Capabilities{})
	if _, err := s.ListFiles(ctx, noFiles); !errors.Is(err, governance.ErrForbidden) {
		t.Fatalf("without files: %v", err)
	}
	if _, err := s.ListArtifacts(ctx, noFiles, "", ""); !errors.Is(err, governance.ErrForbidden) {
		t.Fatalf("without artifacts: %v", err)
	}
	if err := s.DeleteFile(ctx, p, f.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetFile(ctx, p, f.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	if err := s.DeleteFile(ctx, p, f.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	ents, _ = os.ReadDir(filepath.Join(bdir, "files"))
	if len(ents) != 0 {
		t.Fatalf("blob kept after delete: %v", ents)
	}
}
