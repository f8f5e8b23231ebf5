package httpapi_test

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
)

var tarHeader = map[string]string{"Content-Type": "application/x-tar"}

// tarOf builds an archive from headers; a regular file's content is
// its Linkname's bytes repeated to Size (Linkname is then cleared).
func tarOf(t *testing.T, hdrs ...*tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range hdrs {
		fill := ""
		if h.Typeflag == tar.TypeReg {
			fill, h.Linkname = h.Linkname, ""
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg && h.Size > 0 {
			if fill == "" {
				fill = "x"
			}
			if _, err := tw.Write(bytes.Repeat([]byte(fill), int(h.Size)/len(fill)+1)[:h.Size]); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func regular(name, content string) *tar.Header {
	return &tar.Header{Typeflag: tar.TypeReg, Name: name, Size: int64(len(content)), Linkname: content}
}

// listing describes a tree as the computer sees it: type, mode, size,
// mtime (seconds) and symlink targets of every entry, sorted by name.
func listing(t *testing.T, e *env, id, dir string) string {
	t.Helper()
	return e.sh(e.admin, id, "cd "+dir+" && find . -mindepth 1 | LC_ALL=C sort | xargs stat -c '%F %a %s %Y %N'")
}

// TestTarRoundTrip moves a tree with symlinks, modes, an empty directory
// and a 100 MiB file out of a computer as tar and back into it: the
// content (sha256) and the metadata are the same both ways.
func TestTarRoundTrip(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *computer.Config) { c.Disk = 400 << 20 })
	id := e.create(e.admin, nil).ID
	base := "/v1/computers/" + id + "/files/"
	sum := e.sh(e.admin, id, `set -e
mkdir -p src/sub/deep src/empty
head -c 104857600 /dev/urandom > src/big.bin
printf hello > src/sub/a.txt
printf '#!/bin/sh\n' > src/sub/deep/run.sh
chmod 0750 src/sub; chmod 0600 src/sub/a.txt; chmod 0755 src/sub/deep/run.sh; chmod 0700 src/empty
ln -s sub/a.txt src/link
ln -s /etc/passwd src/abs
touch -h -d '2020-01-02 03:04:05' src/sub/a.txt src/link src/empty
sha256sum src/big.bin | cut -d' ' -f1`)
	sum = strings.TrimSpace(sum)

	// Out: the archive, streamed to a file on the host.
	req, _ := http.NewRequestWithContext(t.Context(), "GET", e.url+base+"src?format=tar", nil)
	req.Header.Set("Authorization", "Bearer "+e.admin)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/x-tar" {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("download: %d %s: %s", res.StatusCode, res.Header.Get("Content-Type"), b)
	}
	archive := filepath.Join(t.TempDir(), "src.tar")
	f, err := os.Create(archive)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.Copy(f, res.Body)
	res.Body.Close()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	f, _ = os.Open(archive)
	defer f.Close()
	tr := tar.NewReader(f)
	got := map[string]*tar.Header{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[h.Name] = h
		if h.Name == "big.bin" {
			hash := sha256.New()
			if n, err := io.Copy(hash, tr); err != nil || n != 100<<20 {
				t.Fatalf("big.bin in the archive: %d bytes, %v", n, err)
			}
			if s := hex.EncodeToString(hash.Sum(nil)); s != sum {
				t.Fatalf("big.bin's sha256 in the archive %s, in the computer %s", s, sum)
			}
		}
	}
	want := map[string]struct {
		typ  byte
		mode int64
		link string
	}{
		"big.bin": {tar.TypeReg, 0o644, ""}, "sub/": {tar.TypeDir, 0o750, ""}, "sub/a.txt": {tar.TypeReg, 0o600, ""},
		"sub/deep/": {tar.TypeDir, 0o755, ""}, "sub/deep/run.sh": {tar.TypeReg, 0o755, ""}, "empty/": {tar.TypeDir, 0o700, ""},
		"link": {tar.TypeSymlink, 0o777, "sub/a.txt"}, "abs": {tar.TypeSymlink, 0o777, "/etc/passwd"},
	}
	if len(got) != len(want) {
		t.Fatalf("archive entries %v, want %d", keys(got), len(want))
	}
	for name, w := range want {
		h := got[name]
		if h == nil || h.Typeflag != w.typ || h.Mode != w.mode || h.Linkname != w.link {
			t.Fatalf("entry %s: %+v, want %+v", name, h, w)
		}
	}
	if mt, want := got["sub/a.txt"].ModTime.Unix(), strings.TrimSpace(e.sh(e.admin, id, "stat -c %Y src/sub/a.txt")); strconv.FormatInt(mt, 10) != want {
		t.Fatalf("sub/a.txt's mtime in the archive %d, in the computer %s", mt, want)
	}

	// In: the same archive extracted elsewhere, streamed from the file.
	f.Seek(0, io.SeekStart)
	r := e.doCtx(t.Context(), e.admin, "PUT", base+"dst/copy", f, tarHeader)
	if r.code != http.StatusCreated {
		t.Fatalf("upload: %s", r)
	}
	var done struct {
		Path    string `json:"path"`
		Entries int    `json:"entries"`
		Bytes   int64  `json:"bytes"`
	}
	r.json(t, &done)
	if done.Path != "/workspace/dst/copy" || done.Entries != len(want) || done.Bytes != 100<<20+5+10 {
		t.Fatalf("upload answer %s", r)
	}
	if s := strings.TrimSpace(e.sh(e.admin, id, "sha256sum dst/copy/big.bin | cut -d' ' -f1")); s != sum {
		t.Fatalf("big.bin's sha256 after the round trip %s, want %s", s, sum)
	}
	src, dst := listing(t, e, id, "src"), listing(t, e, id, "dst/copy")
	if src != dst {
		t.Fatalf("the tree changed in the round trip:\n%s\nvs\n%s", src, dst)
	}
	if !strings.Contains(dst, "symbolic link 777 11 ") || !strings.Contains(dst, "'./abs' -> '/etc/passwd'") ||
		!strings.Contains(dst, "directory 700 ") || !strings.Contains(dst, "regular file 600 5 ") {
		t.Fatalf("unexpected tree:\n%s", dst)
	}
	if owner := strings.TrimSpace(e.sh(e.admin, id, "stat -c %u:%g dst/copy/big.bin dst/copy/sub | sort -u")); owner != "1000:1000" {
		t.Fatalf("extracted files belong to %s, want the sandbox user", owner)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestTarHostileArchivesRefused uploads archives that try to write outside
// their directory, through symlinks, or make links and devices: each is
// refused with a 400 naming the entry, and nothing appears outside.
func TestTarHostileArchivesRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *computer.Config) { c.MaxTarBytes = 1 << 20; c.MaxTarEntries = 50 })
	id := e.create(e.admin, nil).ID
	base := "/v1/computers/" + id + "/files/"
	e.sh(e.admin, id, "mkdir -p in outside && echo keep > outside/keep")
	before := e.sh(e.admin, id, "ls -la /tmp /workspace/outside; ls /workspace")

	many := make([]*tar.Header, 60)
	for i := range many {
		many[i] = regular("f"+strings.Repeat("x", i), "")
	}
	cases := []struct {
		name   string
		hdrs   []*tar.Header
		status int
		entry  string // the message names it
	}{
		{"dotdot", []*tar.Header{regular("ok.txt", "fine"), regular("../outside/evil", "pwned")}, 400, "../outside/evil"},
		{"dotdot-inner", []*tar.Header{regular("a/../../outside/evil", "pwned")}, 400, "a/../../outside/evil"},
		{"absolute", []*tar.Header{regular("/tmp/evil", "pwned")}, 400, "/tmp/evil"},
		{"symlink-then-file", []*tar.Header{{Typeflag: tar.TypeSymlink, Name: "ln", Linkname: "/tmp"}, regular("ln/evil", "pwned")}, 400, "ln/evil"},
		{"relative-symlink-then-file", []*tar.Header{{Typeflag: tar.TypeSymlink, Name: "up", Linkname: "../outside"}, regular("up/evil", "pwned")}, 400, "up/evil"},
		{"symlink-then-dir", []*tar.Header{{Typeflag: tar.TypeSymlink, Name: "ln2", Linkname: "../outside"}, {Typeflag: tar.TypeDir, Name: "ln2/d/", Mode: 0o755}}, 400, "ln2/d/"},
		{"hardlink", []*tar.Header{{Typeflag: tar.TypeLink, Name: "hl", Linkname: "../outside/keep"}}, 400, "hl"},
		{"char-device", []*tar.Header{{Typeflag: tar.TypeChar, Name: "null", Devmajor: 1, Devminor: 3}}, 400, "null"},
		{"block-device", []*tar.Header{{Typeflag: tar.TypeBlock, Name: "sda", Devmajor: 8}}, 400, "sda"},
		{"fifo", []*tar.Header{{Typeflag: tar.TypeFifo, Name: "pipe"}}, 400, "pipe"},
		{"too-large", []*tar.Header{{Typeflag: tar.TypeReg, Name: "big", Size: 2 << 20}}, 413, ""},
		{"too-many", many, 413, "50 entries"},
	}
	for _, c := range cases {
		r := e.doCtx(t.Context(), e.admin, "PUT", base+"in", tarOf(t, c.hdrs...), tarHeader)
		code := "invalid_request"
		if c.status == 413 {
			code = "too_large"
		}
		er := r.wantError(t, c.status, code)
		if !strings.Contains(er.Error.Message, c.entry) {
			t.Fatalf("%s: the message does not name %q: %s", c.name, c.entry, r)
		}
	}
	if after := e.sh(e.admin, id, "ls -la /tmp /workspace/outside; ls /workspace"); after != before {
		t.Fatalf("something changed outside the target:\n%s\nvs\n%s", before, after)
	}
	if out := e.sh(e.admin, id, "ls -A in"); strings.Contains(out, "evil") || strings.Contains(out, "null") || strings.Contains(out, "pipe") || strings.Contains(out, "hl") {
		t.Fatalf("a refused entry was extracted: %q", out)
	}
	// An archive cut in the middle of a file: the file is not left behind.
	cut := tarOf(t, &tar.Header{Typeflag: tar.TypeReg, Name: "half", Size: 100 << 10})[:50<<10]
	if msg := e.doCtx(t.Context(), e.admin, "PUT", base+"in", cut, tarHeader).wantError(t, 400, "invalid_request").Error.Message; !strings.Contains(msg, "middle of an entry") {
		t.Fatalf("a cut archive: %s", msg)
	}
	if out := e.sh(e.admin, id, "ls -A in"); strings.Contains(out, "half") || strings.Contains(out, ".cubicle-tar") {
		t.Fatalf("a cut archive left %q", out)
	}
	// Chunked (no Content-Length): the body's own limit, within a file
	// that the archive's limit on files allows.
	body := io.MultiReader(bytes.NewReader(tarOf(t, &tar.Header{Typeflag: tar.TypeReg, Name: "edge", Size: 1<<20 - 10})))
	if msg := e.doCtx(t.Context(), e.admin, "PUT", base+"in", body, tarHeader).wantError(t, 413, "too_large").Error.Message; !strings.Contains(msg, "limited to 1048576 bytes") {
		t.Fatalf("chunked over the limit: %s", msg)
	}
	if out := e.sh(e.admin, id, "ls -A in"); strings.Contains(out, ".cubicle-tar") {
		t.Fatalf("a cut upload left %q", out)
	}
	// A malformed archive is a 400 too, and a setuid bit is dropped.
	e.doCtx(t.Context(), e.admin, "PUT", base+"in", "this is not a tar archive, not even close to one; it goes on for a while so that the reader sees a whole block of garbage rather than a short read: "+strings.Repeat("z", 600), tarHeader).wantError(t, 400, "invalid_request")
	suid := regular("suid", "#!/bin/sh\n")
	suid.Mode = 0o6755
	if r := e.doCtx(t.Context(), e.admin, "PUT", base+"in", tarOf(t, suid), tarHeader); r.code != http.StatusCreated {
		t.Fatalf("suid upload: %s", r)
	}
	if mode := strings.TrimSpace(e.sh(e.admin, id, "stat -c %a in/suid")); mode != "755" {
		t.Fatalf("setuid/setgid kept: mode %s", mode)
	}
}

// TestTarIntoSymlinkRefused: a symlink in the workspace, as the target
// directory, on its way, or inside it, is never followed by an upload.
func TestTarIntoSymlinkRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.create(e.admin, nil).ID
	base := "/v1/computers/" + id + "/files/"
	e.sh(e.admin, id, "ln -s /etc d && ln -s /tmp t && mkdir -p real inside && ln -s /tmp real/l && ln -s ../real inside/s")
	before := e.sh(e.admin, id, "ls -la /tmp /etc /workspace/real")
	for _, c := range []struct{ dir, entry, says string }{
		{"d", "x", "/workspace/d is a symlink"},
		{"t", "x", "/workspace/t is a symlink"},
		{"t/sub", "x", "/workspace/t is a symlink"},
		{"real/l", "x", "/workspace/real/l is a symlink"},
		{"inside", "s/x", `tar entry "s/x"`},
	} {
		r := e.doCtx(t.Context(), e.admin, "PUT", base+c.dir, tarOf(t, regular(c.entry, "pwned")), tarHeader)
		if msg := r.wantError(t, 400, "invalid_request").Error.Message; !strings.Contains(msg, c.says) {
			t.Fatalf("into %s: %s", c.dir, r)
		}
	}
	if after := e.sh(e.admin, id, "ls -la /tmp /etc /workspace/real"); after != before {
		t.Fatalf("something changed through a symlink:\n%s\nvs\n%s", before, after)
	}
	// A full disk (32 MiB here) is a 413 that says so, and leaves no
	// partial file.
	full := tarOf(t, &tar.Header{Typeflag: tar.TypeReg, Name: "one", Size: 20 << 20}, &tar.Header{Typeflag: tar.TypeReg, Name: "two", Size: 20 << 20})
	if msg := e.doCtx(t.Context(), e.admin, "PUT", base+"fill", full, tarHeader).wantError(t, 413, "too_large").Error.Message; !strings.Contains(msg, "no space left on the computer's disk") || !strings.Contains(msg, `"two"`) {
		t.Fatalf("a full disk: %s", msg)
	}
	if out := e.sh(e.admin, id, "ls -A fill"); out != "one\n" {
		t.Fatalf("after a full disk: %q", out)
	}
	// A file in the archive replaces a symlink of the same name (it is
	// not written through).
	if r := e.doCtx(t.Context(), e.admin, "PUT", base+"real", tarOf(t, regular("l", "now a file")), tarHeader); r.code != http.StatusCreated {
		t.Fatalf("replace a symlink: %s", r)
	}
	if out := e.sh(e.admin, id, "stat -c %F real/l; cat real/l; ls /tmp"); !strings.HasPrefix(out, "regular file\nnow a file") {
		t.Fatalf("real/l: %q", out)
	}
}

// TestTarDownloadErrors: what cannot be archived is refused before the
// first byte, with the status of its error.
func TestTarDownloadErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *computer.Config) { c.MaxTarEntries = 10 })
	id := e.create(e.admin, nil).ID
	base := "/v1/computers/" + id + "/files/"
	e.sh(e.admin, id, "mkdir many small && for i in $(seq 20); do touch many/$i; done && echo hi > small/a && echo f > file && ln -s /etc etc")
	e.do(e.admin, "GET", base+"missing?format=tar", nil).wantError(t, 404, "")
	e.do(e.admin, "GET", base+"file?format=tar", nil).wantError(t, 400, "")
	e.do(e.admin, "GET", base+"etc?format=tar", nil).wantError(t, 400, "")
	e.do(e.admin, "GET", base+"small?format=zip", nil).wantError(t, 400, "")
	if msg := e.do(e.admin, "GET", base+"many?format=tar", nil).wantError(t, 413, "too_large").Error.Message; !strings.Contains(msg, "10 entries") {
		t.Fatalf("over the entry limit: %s", msg)
	}
	r := e.do(e.admin, "GET", base+"small?format=tar", nil)
	if r.code != 200 || !strings.Contains(r.hdr.Get("Content-Disposition"), "small.tar") {
		t.Fatalf("small: %s", r)
	}
	tr := tar.NewReader(bytes.NewReader(r.body))
	h, err := tr.Next()
	if err != nil || h.Name != "a" || h.Size != 3 {
		t.Fatalf("small's archive: %+v %v", h, err)
	}
	// The whole workspace (an empty path) works too.
	if r := e.do(e.admin, "GET", base+"?format=tar", nil); r.code != 413 {
		t.Fatalf("the workspace (over 10 entries): %s", r)
	}
}

// TestFilesMoveStatMkdir: the small file operations, confined like the rest.
func TestFilesMoveStatMkdir(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.create(e.admin, nil).ID
	files := "/v1/computers/" + id + "/files"
	r := e.do(e.admin, "POST", files+"/mkdir", map[string]any{"path": "a/b/c", "parents": true})
	var fi struct {
		Name, Path, Type string
		Size             int64
		Mode             uint32
	}
	r.json(t, &fi)
	if r.code != http.StatusCreated || fi.Path != "/workspace/a/b/c" || fi.Type != "dir" {
		t.Fatalf("mkdir: %s", r)
	}
	e.do(e.admin, "POST", files+"/mkdir", map[string]any{"path": "a/b/c"}).wantError(t, 400, "")
	e.do(e.admin, "POST", files+"/mkdir", map[string]any{"path": "x/y"}).wantError(t, 404, "")
	e.do(e.admin, "POST", files+"/mkdir", map[string]any{"path": "q", "parent": true}).wantError(t, 400, "")
	e.do(e.admin, "PUT", files+"/a/f.txt", "hello")
	r = e.do(e.admin, "GET", files+"/a/f.txt?stat=true", nil)
	r.json(t, &fi)
	if r.code != 200 || fi.Type != "file" || fi.Size != 5 || fi.Name != "f.txt" {
		t.Fatalf("stat: %s", r)
	}
	e.do(e.admin, "GET", files+"/nope?stat=true", nil).wantError(t, 404, "")
	r = e.do(e.admin, "POST", files+"/move", map[string]any{"from": "a/f.txt", "to": "a/b/g.txt"})
	r.json(t, &fi)
	if r.code != 200 || fi.Path != "/workspace/a/b/g.txt" || fi.Size != 5 {
		t.Fatalf("move: %s", r)
	}
	if out := e.sh(e.admin, id, "cat a/b/g.txt; test ! -e a/f.txt && echo gone"); out != "hellogone\n" {
		t.Fatalf("after the move: %q", out)
	}
	e.do(e.admin, "PUT", files+"/other.txt", "other")
	e.do(e.admin, "POST", files+"/move", map[string]any{"from": "other.txt", "to": "a/b/g.txt"}).wantError(t, 400, "")
	if r := e.do(e.admin, "POST", files+"/move", map[string]any{"from": "other.txt", "to": "a/b/g.txt", "overwrite": true}); r.code != 200 {
		t.Fatalf("move with overwrite: %s", r)
	}
	e.do(e.admin, "POST", files+"/move", map[string]any{"from": "a/b/g.txt", "to": "/etc/g.txt"}).wantError(t, 400, "")
	e.do(e.admin, "POST", files+"/move", map[string]any{"from": "/etc/passwd", "to": "p"}).wantError(t, 400, "")
	e.do(e.admin, "POST", files+"/move", map[string]any{"from": "missing", "to": "p"}).wantError(t, 404, "")
	e.sh(e.admin, id, "ln -s /tmp out")
	e.do(e.admin, "POST", files+"/move", map[string]any{"from": "a/b/g.txt", "to": "out/g.txt"}).wantError(t, 400, "")
	if out := e.sh(e.admin, id, "cat a/b/g.txt; ls /tmp"); out != "other" {
		t.Fatalf("after refused moves: %q", out)
	}
}
