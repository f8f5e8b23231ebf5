package agent_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/blob"
	"github.com/cubicle-sandbox/cubicle/internal/files"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/store"
	"github.com/cubicle-sandbox/cubicle/internal/store/sqlite"

	"github.com/cubicle-sandbox/cubicle/internal/artifact"
)

// exporter exports files of sb as artifacts, as read_file with export does.
type exporter struct {
	svc   *files.Service
	blobs *blob.Dir
	p     governance.Principal
	sb    sandbox.Sandbox
}

func newExporter(t *testing.T, sb sandbox.Sandbox) *exporter {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	b, err := blob.NewDir(filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	p := governance.Principal{Org: store.Org{ID: "org_x"}, Key: store.Key{ID: "key_x"}, Caps: governance.AllCapabilities()}
	return &exporter{svc: files.New(st, b, files.Limits{MaxBytes: 64 << 20}), blobs: b, p: p, sb: sb}
}

// export exports p and returns the artifact's bytes.
func (e *exporter) export(t *testing.T, p string) ([]byte, error) {
	t.Helper()
	ctx := context.Background()
	a, err := e.svc.Export(ctx, e.p, e.sb, e.sb.ID(), p)
	if err != nil {
		return nil, err
	}
	_, rc, err := e.svc.OpenArtifact(ctx, e.p, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil || int64(len(b)) != a.Bytes {
		t.Fatalf("artifact of %d bytes: %d read, %v", a.Bytes, len(b), err)
	}
	return b, nil
}

// A file that grows past the export limit while it is exported is either
// not exported (too large, or being written) or exported as it was at one
// moment: never cut at the limit.
func TestExportOfAGrowingFile(t *testing.T) {
	sb, _ := realComputer(t)
	e := newExporter(t, sb)
	writeFile(t, sb, "/workspace/grow.py", `import sys, time
time.sleep(float(sys.argv[2]))
for i in range(12):
    with open(sys.argv[1], "ab") as f:
        f.write(b"g" * 1000000)
    time.sleep(0.005)
open("/workspace/grown", "w").close()
`)
	outcomes := map[string]int{}
	for i := range 8 {
		// 21 MiB now, 1 MB more every few milliseconds from now on.
		mustRun(t, sb, "rm -f /workspace/grown; head -c 22020096 /dev/zero > /workspace/big && { /usr/bin/python3 /workspace/grow.py /workspace/big "+[]string{"0", "0.02", "0.05", "0.1"}[i%4]+" >/dev/null 2>&1 & }")
		b, err := e.export(t, "/workspace/big")
		switch {
		case errors.Is(err, artifact.ErrTooLarge):
			outcomes["too large"]++
		case errors.Is(err, sandbox.ErrChanging):
			outcomes["being written"]++
		case err != nil:
			t.Fatalf("export: %v", err)
		case (len(b)-21<<20)%1000000 != 0:
			t.Fatalf("exported %d bytes: the file was never that long (21 MiB, then 1 MB more at a time)", len(b))
		default:
			outcomes["exported"]++
		}
		waitFile(t, sb, "/workspace/grown")
	}
	t.Logf("outcomes: %v", outcomes)
}

// A file rewritten in place while it is exported is exported whole as one
// of its versions, or not at all: never mixed.
func TestExportOfAFileRewrittenInPlace(t *testing.T) {
	sb, _ := realComputer(t)
	e := newExporter(t, sb)
	const size = 8 << 20
	writeFile(t, sb, "/workspace/rewrite.py", `import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
os.write(fd, b"a" * (8 << 20))
os.close(fd)
open("/workspace/rewriting", "w").close()
for i in range(100000):
    fd = os.open(sys.argv[1], os.O_WRONLY)
    for j in range(8):
        os.write(fd, bytes([b"ab"[i % 2]]) * (1 << 20))
    os.close(fd)
    time.sleep(0.2)
`)
	mustRun(t, sb, "/usr/bin/python3 /workspace/rewrite.py /workspace/doc >/dev/null 2>&1 &")
	waitFile(t, sb, "/workspace/rewriting")
	// Exports are tried until three were taken whole (a loaded machine
	// stretches the rewrites, so a fixed number of tries may all meet one).
	exported, tries := 0, 0
	for ; exported < 3 && tries < 60; tries++ {
		b, err := e.export(t, "/workspace/doc")
		if errors.Is(err, sandbox.ErrChanging) {
			time.Sleep(37 * time.Millisecond) // out of step with the writer
			continue
		}
		if err != nil {
			t.Fatalf("export: %v", err)
		}
		if len(b) != size || (!bytes.Equal(b, bytes.Repeat([]byte("a"), size)) && !bytes.Equal(b, bytes.Repeat([]byte("b"), size))) {
			t.Fatalf("exported %d bytes mixing versions: %d a, %d b", len(b), bytes.Count(b, []byte("a")), bytes.Count(b, []byte("b")))
		}
		exported++
	}
	t.Logf("%d of %d exports taken whole", exported, tries)
	if exported == 0 {
		t.Error("no export succeeded between the rewrites")
	}
}
