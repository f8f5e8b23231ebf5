package linux_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// fileCtx bounds one file API call: none of them may hang.
func fileCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func fileWrite(t *testing.T, sb sandbox.Sandbox, path string, data []byte) sandbox.Written {
	t.Helper()
	w, err := sb.WriteFile(fileCtx(t), sandbox.FileWrite{Path: path}, bytes.NewReader(data))
	if err != nil {
		t.Fatalf("WriteFile(%q): %v", path, err)
	}
	return w
}

func fileRead(t *testing.T, sb sandbox.Sandbox, path string) []byte {
	t.Helper()
	var buf bytes.Buffer
	end, err := sb.ReadFile(fileCtx(t), sandbox.FileRead{Path: path}, &buf)
	if err != nil {
		t.Fatalf("ReadFile(%q): %v", path, err)
	}
	if end.Truncated || end.Size != int64(buf.Len()) {
		t.Fatalf("ReadFile(%q): end %+v after %d bytes", path, end, buf.Len())
	}
	return buf.Bytes()
}

// fileRefused checks that err is the sentinel and names the path.
func fileRefused(t *testing.T, what string, err, sentinel error, path string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: succeeded, want %v", what, sentinel)
		return
	}
	if !errors.Is(err, sentinel) {
		t.Errorf("%s: err = %v, want %v", what, err, sentinel)
	}
	if path != "" && !strings.Contains(err.Error(), path) {
		t.Errorf("%s: error %q does not name %q", what, err, path)
	}
}

func fileRandom(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFileRoundTrip(t *testing.T) {
	sb := newComputer(t, newDriver(t), nil)
	ctx := fileCtx(t)
	data := fileRandom(t, 300_000) // several chunks, not a multiple of one

	w := fileWrite(t, sb, "a.bin", data)
	if w.Path != "/workspace/a.bin" || w.Bytes != int64(len(data)) {
		t.Fatalf("Written = %+v, want /workspace/a.bin with %d bytes", w, len(data))
	}
	if got := fileRead(t, sb, "/workspace/a.bin"); !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes that differ from the %d written", len(got), len(data))
	}
	// The file is really there for the user's processes.
	sum := mustSucceed(t, sb, "stat -c '%u %g %s %a' a.bin; sha256sum < a.bin | cut -d' ' -f1")
	want := fmt.Sprintf("1000 1000 %d 644\n", len(data))
	if !strings.HasPrefix(sum, want) {
		t.Errorf("inside the computer: %q, want prefix %q (owned by the user, mode 644)", sum, want)
	}
	// Empty files and explicit modes.
	w, err := sb.WriteFile(ctx, sandbox.FileWrite{Path: "/workspace/empty", Mode: 0o600}, strings.NewReader(""))
	if err != nil || w.Bytes != 0 || w.Path != "/workspace/empty" {
		t.Fatalf("empty write: %+v, %v", w, err)
	}
	if got := mustSucceed(t, sb, "stat -c '%u %a %s' /workspace/empty"); got != "1000 600 0\n" {
		t.Errorf("empty file: %q", got)
	}
	// Overwrite replaces the content.
	fileWrite(t, sb, "a.bin", []byte("short"))
	if got := fileRead(t, sb, "a.bin"); string(got) != "short" {
		t.Errorf("after overwrite: %q", got)
	}

	fi, err := sb.Stat(ctx, "a.bin")
	if err != nil {
		t.Fatal(err)
	}
	if fi.Path != "/workspace/a.bin" || fi.Name != "a.bin" || fi.Type != "file" || fi.Size != 5 || fi.Mode != 0o644 {
		t.Errorf("Stat = %+v", fi)
	}
	if d := time.Since(fi.ModTime); d < -time.Minute || d > time.Minute {
		t.Errorf("ModTime %v is not about now", fi.ModTime)
	}
	root, err := sb.Stat(ctx, ".")
	if err != nil || root.Path != "/workspace" || root.Type != "dir" {
		t.Errorf("Stat(.) = %+v, %v", root, err)
	}
	if _, err := sb.Stat(ctx, "missing"); !errors.Is(err, sandbox.ErrNotFound) || !strings.Contains(err.Error(), "/workspace/missing") {
		t.Errorf("Stat(missing) = %v, want ErrNotFound naming /workspace/missing", err)
	}

	// Mkdir, with and without parents.
	if err := sb.Mkdir(ctx, "x/y/z", false); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Mkdir without parents of a missing parent: %v, want ErrNotFound", err)
	}
	if err := sb.Mkdir(ctx, "/workspace/x/y/z", true); err != nil {
		t.Fatalf("Mkdir -p: %v", err)
	}
	if err := sb.Mkdir(ctx, "x/y/z", true); err != nil {
		t.Errorf("Mkdir -p of an existing directory: %v", err)
	}
	if err := sb.Mkdir(ctx, "x/y", false); !errors.Is(err, sandbox.ErrExists) {
		t.Errorf("Mkdir of an existing directory: %v, want ErrExists", err)
	}
	if err := sb.Mkdir(ctx, "a.bin/sub", true); err == nil {
		t.Error("Mkdir under a regular file succeeded")
	}
	if got := mustSucceed(t, sb, "stat -c '%u %F' x/y/z"); got != "1000 directory\n" {
		t.Errorf("x/y/z inside: %q", got)
	}
	fileWrite(t, sb, "x/y/z/f", []byte("deep"))
	if _, err := sb.WriteFile(ctx, sandbox.FileWrite{Path: "p/q/r.txt"}, strings.NewReader("x")); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("write into a missing directory without Parents: %v, want ErrNotFound", err)
	}
	w, err = sb.WriteFile(ctx, sandbox.FileWrite{Path: "p/q/r.txt", Parents: true}, strings.NewReader("x"))
	if err != nil || w.Path != "/workspace/p/q/r.txt" {
		t.Errorf("write with Parents: %+v, %v", w, err)
	}

	// Remove: files, empty and non-empty directories, trees.
	if err := sb.Remove(ctx, "a.bin", false); err != nil {
		t.Errorf("Remove(a.bin): %v", err)
	}
	if _, err := sb.Stat(ctx, "a.bin"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Stat after Remove: %v, want ErrNotFound", err)
	}
	if err := sb.Remove(ctx, "a.bin", false); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("second Remove: %v, want ErrNotFound", err)
	}
	if err := sb.Remove(ctx, "x", false); !errors.Is(err, sandbox.ErrNotEmpty) {
		t.Errorf("Remove of a non-empty directory: %v, want ErrNotEmpty", err)
	}
	if err := sb.Remove(ctx, "/workspace/x", true); err != nil {
		t.Errorf("recursive Remove: %v", err)
	}
	if err := sb.Mkdir(ctx, "emptydir", false); err != nil {
		t.Fatal(err)
	}
	if err := sb.Remove(ctx, "emptydir", false); err != nil {
		t.Errorf("Remove of an empty directory: %v", err)
	}
	if got := mustSucceed(t, sb, "ls -A"); got != "empty\np\n" {
		t.Errorf("workspace after removals: %q", got)
	}
}

func TestFileList(t *testing.T) {
	sb := newComputer(t, newDriver(t), nil)
	ctx := fileCtx(t)
	if err := sb.Mkdir(ctx, "many", false); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		fileWrite(t, sb, fmt.Sprintf("many/f%02d", i), bytes.Repeat([]byte{'x'}, i))
	}
	l, err := sb.List(ctx, "many")
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Entries) != 20 || l.Truncated {
		t.Fatalf("List(many) = %d entries (truncated %v), want 20", len(l.Entries), l.Truncated)
	}
	seen := map[string]bool{}
	for _, e := range l.Entries {
		var i int
		if _, err := fmt.Sscanf(e.Name, "f%02d", &i); err != nil {
			t.Fatalf("unexpected entry %+v", e)
		}
		if e.Type != "file" || e.Size != int64(i) || e.Path != "/workspace/many/"+e.Name {
			t.Errorf("entry %+v: want a file of %d bytes at /workspace/many/%s", e, i, e.Name)
		}
		seen[e.Name] = true
	}
	if len(seen) != 20 {
		t.Errorf("%d distinct names, want 20", len(seen))
	}

	// Every type is named; symlinks are reported, not followed.
	mustSucceed(t, sb, "mkdir -p kinds/d && touch kinds/f && ln -s /etc/passwd kinds/l && mkfifo kinds/p")
	l, err = sb.List(ctx, "/workspace/kinds")
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]string{}
	for _, e := range l.Entries {
		types[e.Name] = e.Type
	}
	want := map[string]string{"d": "dir", "f": "file", "l": "symlink", "p": "fifo"}
	if fmt.Sprint(types) != fmt.Sprint(want) {
		t.Errorf("types = %v, want %v", types, want)
	}
	if _, err := sb.List(ctx, "kinds/f"); !errors.Is(err, sandbox.ErrNotDir) {
		t.Errorf("List of a file: %v, want ErrNotDir", err)
	}
	if _, err := sb.List(ctx, "kinds/l"); !errors.Is(err, sandbox.ErrPathEscape) {
		t.Errorf("List through a symlink to /etc: %v, want ErrPathEscape", err)
	}
	root, err := sb.List(ctx, "/workspace")
	if err != nil || len(root.Entries) != 2 {
		t.Errorf("List(/workspace) = %+v, %v; want many and kinds", root, err)
	}
}

func TestFilePermissionsAreTheUsers(t *testing.T) {
	sb := newComputer(t, newDriver(t), nil)
	ctx := fileCtx(t)
	mustSucceed(t, sb, "echo secret > locked && chmod 000 locked && mkdir ro && chmod 555 ro && mkdir closed && echo x > closed/f && chmod 000 closed")

	var buf bytes.Buffer
	_, err := sb.ReadFile(ctx, sandbox.FileRead{Path: "locked"}, &buf)
	fileRefused(t, "read of a mode-000 file", err, sandbox.ErrPermission, "/workspace/locked")
	if buf.Len() != 0 {
		t.Errorf("read of a mode-000 file returned %q", buf.String())
	}
	_, err = sb.WriteFile(ctx, sandbox.FileWrite{Path: "ro/new"}, strings.NewReader("x"))
	fileRefused(t, "write into a mode-555 directory", err, sandbox.ErrPermission, "/workspace/ro/new")
	err = sb.Mkdir(ctx, "ro/sub", false)
	fileRefused(t, "mkdir in a mode-555 directory", err, sandbox.ErrPermission, "/workspace/ro/sub")
	_, err = sb.ReadFile(ctx, sandbox.FileRead{Path: "closed/f"}, &buf)
	fileRefused(t, "read through a mode-000 directory", err, sandbox.ErrPermission, "")
	_, err = sb.List(ctx, "closed")
	fileRefused(t, "list of a mode-000 directory", err, sandbox.ErrPermission, "/workspace/closed")
	if got := mustSucceed(t, sb, "ls -A ro; stat -c %a locked"); got != "0\n" {
		t.Errorf("after refused calls: %q", got)
	}
}

func TestFileEscapesAreRefused(t *testing.T) {
	sb := newComputer(t, newDriver(t), nil)
	ctx := fileCtx(t)
	mustSucceed(t, sb, strings.Join([]string{
		"ln -s /proc/1/environ env",
		"ln -s /etc/passwd pw",
		"ln -s ../../etc up",
		"ln -s /etc etcdir",
		"ln -s /tmp tmpdir",
		"ln -s /tmp/created-by-write outlink",
		"mkdir -p sub && ln -s ../../../etc sub/deep",
		"ln -s /workspace/../etc/passwd sneaky",
	}, " && "))

	paths := []struct {
		path    string
		display string // what the error must name
	}{
		{"../etc/passwd", "../etc/passwd"},
		{"/etc/passwd", "/etc/passwd"},
		{"/workspace/../etc/passwd", "/workspace/../etc/passwd"},
		{"sub/../../etc/passwd", "sub/../../etc/passwd"},
		{"env", "/workspace/env"},
		{"pw", "/workspace/pw"},
		{"up/passwd", "/workspace/up/passwd"},
		{"etcdir/passwd", "/workspace/etcdir/passwd"},
		{"sub/deep/passwd", "/workspace/sub/deep/passwd"},
		{"sneaky", "/workspace/sneaky"},
		{"/proc/self/root/etc/passwd", "/proc/self/root/etc/passwd"},
	}
	for _, p := range paths {
		var buf bytes.Buffer
		_, err := sb.ReadFile(ctx, sandbox.FileRead{Path: p.path}, &buf)
		fileRefused(t, "ReadFile("+p.path+")", err, sandbox.ErrPathEscape, p.display)
		if buf.Len() > 0 {
			t.Errorf("ReadFile(%s) leaked %d bytes: %.40q", p.path, buf.Len(), buf.String())
		}
		if err != nil && (strings.Contains(err.Error(), "root:") || strings.Contains(err.Error(), "PATH=")) {
			t.Errorf("ReadFile(%s): the error leaks content: %v", p.path, err)
		}
		_, err = sb.Stat(ctx, p.path+"/x")
		if err == nil {
			t.Errorf("Stat(%s/x) succeeded", p.path)
		}
		_, err = sb.List(ctx, p.path)
		if err == nil {
			t.Errorf("List(%s) succeeded", p.path)
		}
	}

	// Writes through escaping paths create nothing outside.
	for _, p := range []struct{ path, display string }{
		{"/tmp/created-by-write", "/tmp/created-by-write"},
		{"../tmp/created-by-write", "../tmp/created-by-write"},
		{"tmpdir/created-by-write", "/workspace/tmpdir"},
		{"outlink", "/workspace/outlink"},
	} {
		_, err := sb.WriteFile(ctx, sandbox.FileWrite{Path: p.path}, strings.NewReader("pwned"))
		fileRefused(t, "WriteFile("+p.path+")", err, sandbox.ErrPathEscape, p.display)
	}
	_, err := sb.WriteFile(ctx, sandbox.FileWrite{Path: "tmpdir/newdir/f", Parents: true}, strings.NewReader("pwned"))
	fileRefused(t, "WriteFile(tmpdir/newdir/f, parents)", err, sandbox.ErrPathEscape, "/workspace/tmpdir")
	err = sb.Mkdir(ctx, "tmpdir/mk/a", true)
	fileRefused(t, "Mkdir(tmpdir/mk/a, parents)", err, sandbox.ErrPathEscape, "/workspace/tmpdir")
	err = sb.Mkdir(ctx, "tmpdir/mk1", false)
	fileRefused(t, "Mkdir(tmpdir/mk1)", err, sandbox.ErrPathEscape, "/workspace/tmpdir")
	err = sb.Remove(ctx, "etcdir/passwd", false)
	fileRefused(t, "Remove(etcdir/passwd)", err, sandbox.ErrPathEscape, "/workspace/etcdir")
	if got := mustSucceed(t, sb, "ls -A /tmp; readlink outlink; test -f /etc/passwd && echo passwd-ok"); got != "/tmp/created-by-write\npasswd-ok\n" {
		t.Errorf("after refused writes: /tmp listing, outlink target and /etc/passwd: %q", got)
	}
}

func TestFileSpecialFiles(t *testing.T) {
	sb := newComputer(t, newDriver(t), nil)
	ctx := fileCtx(t)
	mustSucceed(t, sb, "mkfifo fifo && mkdir dir && python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); s.bind('sock')\"")

	for _, p := range []string{"fifo", "sock"} {
		start := time.Now()
		var buf bytes.Buffer
		_, err := sb.ReadFile(ctx, sandbox.FileRead{Path: p}, &buf)
		fileRefused(t, "ReadFile("+p+")", err, sandbox.ErrNotRegular, "/workspace/"+p)
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("ReadFile(%s) took %v", p, d)
		}
	}
	start := time.Now()
	_, err := sb.WriteFile(ctx, sandbox.FileWrite{Path: "fifo"}, strings.NewReader("into the pipe"))
	fileRefused(t, "WriteFile(fifo)", err, sandbox.ErrNotRegular, "/workspace/fifo")
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("WriteFile(fifo) took %v", d)
	}
	if got := mustSucceed(t, sb, "stat -c %F fifo"); got != "fifo\n" {
		t.Errorf("after WriteFile, fifo is a %q", got)
	}

	var buf bytes.Buffer
	_, err = sb.ReadFile(ctx, sandbox.FileRead{Path: "dir"}, &buf)
	fileRefused(t, "ReadFile(dir)", err, sandbox.ErrIsDir, "/workspace/dir")
	_, err = sb.ReadFile(ctx, sandbox.FileRead{Path: "/workspace"}, &buf)
	fileRefused(t, "ReadFile(/workspace)", err, sandbox.ErrIsDir, "/workspace")
	_, err = sb.WriteFile(ctx, sandbox.FileWrite{Path: "dir"}, strings.NewReader("x"))
	fileRefused(t, "WriteFile(dir)", err, sandbox.ErrIsDir, "/workspace/dir")
	_, err = sb.WriteFile(ctx, sandbox.FileWrite{Path: "/workspace/"}, strings.NewReader("x"))
	fileRefused(t, "WriteFile(/workspace/)", err, sandbox.ErrIsDir, "/workspace")

	for _, p := range []string{".", "/workspace", "/workspace/", "sub/..", ""} {
		err := sb.Remove(ctx, p, true)
		if err == nil {
			t.Errorf("Remove(%q, recursive) succeeded", p)
		} else if !errors.Is(err, sandbox.ErrInvalid) {
			t.Errorf("Remove(%q): %v, want ErrInvalid", p, err)
		}
	}
	if got := mustSucceed(t, sb, "ls -A /workspace | wc -l"); got != "3\n" {
		t.Errorf("workspace has %q entries after refused removals, want 3", got)
	}
	// A NUL byte or an absurd length is refused before touching anything.
	_, err = sb.Stat(ctx, "a\x00b")
	fileRefused(t, "Stat(NUL)", err, sandbox.ErrInvalid, "")
	_, err = sb.Stat(ctx, strings.Repeat("a/", 5000))
	fileRefused(t, "Stat(10000 bytes)", err, sandbox.ErrInvalid, "")
	// A path component longer than NAME_MAX.
	_, err = sb.WriteFile(ctx, sandbox.FileWrite{Path: strings.Repeat("n", 300)}, strings.NewReader("x"))
	fileRefused(t, "WriteFile(300-byte name)", err, sandbox.ErrInvalid, "")
}

func TestFileRemoveTreeKeepsSymlinkTargets(t *testing.T) {
	sb := newComputer(t, newDriver(t), nil)
	ctx := fileCtx(t)
	mustSucceed(t, sb, strings.Join([]string{
		"mkdir -p /tmp/keep/inner && echo precious > /tmp/keep/f && echo inner > /tmp/keep/inner/g",
		"echo mine > kept-in-workspace",
		"mkdir -p tree/a/b/c && echo x > tree/a/b/c/file",
		"ln -s /tmp/keep tree/a/linkdir",
		"ln -s /tmp/keep/f tree/a/b/linkfile",
		"ln -s ../../kept-in-workspace tree/a/rel",
		"ln -s /tmp/keep toplink",
		"mkfifo tree/a/fifo",
	}, " && "))

	if err := sb.Remove(ctx, "tree", true); err != nil {
		t.Fatalf("Remove(tree, recursive): %v", err)
	}
	if err := sb.Remove(ctx, "toplink", true); err != nil {
		t.Fatalf("Remove(toplink, recursive): %v", err)
	}
	got := mustSucceed(t, sb, "cat /tmp/keep/f /tmp/keep/inner/g kept-in-workspace; ls -A")
	if got != "precious\ninner\nmine\nkept-in-workspace\n" {
		t.Errorf("after removing the tree: %q; the symlinks' targets must survive and the tree must be gone", got)
	}
	// Removing through a symlinked directory is an escape, not a deletion.
	mustSucceed(t, sb, "ln -s /tmp/keep again")
	err := sb.Remove(ctx, "again/f", false)
	fileRefused(t, "Remove(again/f)", err, sandbox.ErrPathEscape, "/workspace/again")
	err = sb.Remove(ctx, "again/inner", true)
	fileRefused(t, "Remove(again/inner, recursive)", err, sandbox.ErrPathEscape, "/workspace/again")
	if got := mustSucceed(t, sb, "cat /tmp/keep/f /tmp/keep/inner/g"); got != "precious\ninner\n" {
		t.Errorf("outside files after refused removals: %q", got)
	}
}

func TestFileReadLimit(t *testing.T) {
	sb := newComputer(t, newDriver(t), nil)
	ctx := fileCtx(t)
	data := fileRandom(t, 100_000)
	fileWrite(t, sb, "big", data)
	for _, limit := range []int64{1, 1000, 32 << 10, 32<<10 + 1, 99_999} {
		var buf bytes.Buffer
		end, err := sb.ReadFile(ctx, sandbox.FileRead{Path: "big", Limit: limit}, &buf)
		if err != nil {
			t.Fatalf("limit %d: %v", limit, err)
		}
		if int64(buf.Len()) != limit || !bytes.Equal(buf.Bytes(), data[:limit]) {
			t.Errorf("limit %d: got %d bytes (prefix match %v)", limit, buf.Len(), bytes.HasPrefix(data, buf.Bytes()))
		}
		if !end.Truncated || end.Size != int64(len(data)) || end.Path != "/workspace/big" {
			t.Errorf("limit %d: end = %+v, want truncated, size %d, path /workspace/big", limit, end, len(data))
		}
	}
	for _, limit := range []int64{100_000, 1 << 20, 0} {
		var buf bytes.Buffer
		end, err := sb.ReadFile(ctx, sandbox.FileRead{Path: "big", Limit: limit}, &buf)
		if err != nil || !bytes.Equal(buf.Bytes(), data) || end.Truncated || end.Size != int64(len(data)) {
			t.Errorf("limit %d: %d bytes, end %+v, err %v; want the whole file", limit, buf.Len(), end, err)
		}
	}
}

// fileFailingReader yields n bytes, then an error.
type fileFailingReader struct {
	n   int
	err error
}

func (r *fileFailingReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, r.err
	}
	k := min(len(p), r.n)
	clear(p[:k])
	r.n -= k
	return k, nil
}

// fileNoTemp fails if an upload left a temporary file in dir.
func fileNoTemp(t *testing.T, sb sandbox.Sandbox, dir string) {
	t.Helper()
	l, err := sb.List(fileCtx(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range l.Entries {
		if strings.HasPrefix(e.Name, ".cubicle-upload-") {
			t.Errorf("a failed upload left %s behind (%d bytes)", e.Path, e.Size)
		}
	}
}

func TestFileWriteBounds(t *testing.T) {
	sb := newComputer(t, newDriver(t), nil) // 64 MiB disk
	ctx := fileCtx(t)
	old := fileRandom(t, 1<<20)
	fileWrite(t, sb, "keep.bin", old)

	// Larger than the whole disk (and the file limit).
	start := time.Now()
	_, err := sb.WriteFile(ctx, sandbox.FileWrite{Path: "keep.bin"}, io.LimitReader(fileZeros{}, 80<<20))
	if err == nil || !(errors.Is(err, sandbox.ErrNoSpace) || errors.Is(err, sandbox.ErrTooLarge)) {
		t.Errorf("80 MiB into a 64 MiB computer: %v, want ErrNoSpace or ErrTooLarge", err)
	} else if !strings.Contains(err.Error(), "/workspace/keep.bin") {
		t.Errorf("error %q does not name the path", err)
	}
	t.Logf("refusing 80 MiB took %v", time.Since(start))
	if got := fileRead(t, sb, "keep.bin"); !bytes.Equal(got, old) {
		t.Errorf("a failed write changed the previous content (%d bytes now)", len(got))
	}
	fileNoTemp(t, sb, ".")

	// Less than the file limit but more than the free space: ENOSPC midway.
	mustSucceed(t, sb, "mkdir -p sub && head -c 40M /dev/zero > sub/filler")
	fileWrite(t, sb, "sub/keep.txt", []byte("previous"))
	_, err = sb.WriteFile(ctx, sandbox.FileWrite{Path: "sub/keep.txt"}, io.LimitReader(fileZeros{}, 30<<20))
	fileRefused(t, "30 MiB into ~20 MiB of free space", err, sandbox.ErrNoSpace, "/workspace/sub/keep.txt")
	if got := fileRead(t, sb, "sub/keep.txt"); string(got) != "previous" {
		t.Errorf("after ENOSPC the file holds %d bytes, want the previous content", len(got))
	}
	fileNoTemp(t, sb, "sub")
	// The space of the failed upload was given back.
	fileWrite(t, sb, "sub/after", make([]byte, 10<<20))

	// The host's reader fails midway: the upload is aborted, nothing changes.
	boom := errors.New("host-side read failure")
	_, err = sb.WriteFile(ctx, sandbox.FileWrite{Path: "sub/keep.txt"}, &fileFailingReader{n: 200_000, err: boom})
	if !errors.Is(err, boom) {
		t.Errorf("aborted upload: %v, want the reader's error", err)
	}
	if got := fileRead(t, sb, "sub/keep.txt"); string(got) != "previous" {
		t.Errorf("after an aborted upload the file holds %d bytes", len(got))
	}
	fileNoTemp(t, sb, "sub")

	// A cancelled context aborts too.
	cctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	go func() {
		pw.Write(make([]byte, 100_000))
		cancel()
		pw.Write(make([]byte, 100_000))
		pw.Close()
	}()
	_, err = sb.WriteFile(cctx, sandbox.FileWrite{Path: "sub/new-cancelled"}, pr)
	pr.Close()
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled upload: %v, want context.Canceled", err)
	}
	if _, err := sb.Stat(ctx, "sub/new-cancelled"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("a cancelled upload created its file: %v", err)
	}
	fileNoTemp(t, sb, "sub")
	if got := mustSucceed(t, sb, "ls -A sub | grep -c cubicle-upload || true"); got != "0\n" {
		t.Errorf("temporary files inside: %q", got)
	}
}

type fileZeros struct{}

func (fileZeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func TestFileConcurrentWritesAndReads(t *testing.T) {
	sb := newComputer(t, newDriver(t), nil)
	ctx := fileCtx(t)
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		data := fileRandom(t, 200_000+i*1000)
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := fmt.Sprintf("conc/f%d", i)
			for round := 0; round < 3; round++ {
				w, err := sb.WriteFile(ctx, sandbox.FileWrite{Path: p, Parents: true}, bytes.NewReader(data))
				if err != nil {
					errs <- fmt.Errorf("write %s: %w", p, err)
					return
				}
				if w.Bytes != int64(len(data)) {
					errs <- fmt.Errorf("write %s: %d bytes, want %d", p, w.Bytes, len(data))
					return
				}
				var buf bytes.Buffer
				if _, err := sb.ReadFile(ctx, sandbox.FileRead{Path: p}, &buf); err != nil {
					errs <- fmt.Errorf("read %s: %w", p, err)
					return
				}
				if !bytes.Equal(buf.Bytes(), data) {
					errs <- fmt.Errorf("read %s: %d bytes differ from the %d written", p, buf.Len(), len(data))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	l, err := sb.List(ctx, "conc")
	if err != nil || len(l.Entries) != n {
		t.Errorf("List(conc) = %d entries, %v; want %d", len(l.Entries), err, n)
	}
}
