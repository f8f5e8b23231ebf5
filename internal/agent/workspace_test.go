package agent

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
)

func TestRel(t *testing.T) {
	long := strings.Repeat("a/", 2500) // 5000 bytes
	maxOK := strings.Repeat("b", maxPathLen)
	cases := []struct {
		in   string
		want string // "" when an error is expected
		err  error
	}{
		{"", "", protocol.ErrInvalid},
		{".", ".", nil},
		{"./", ".", nil},
		{"a", "a", nil},
		{"a/", "a", nil},
		{"a/..", ".", nil},
		{"a/../b", "b", nil},
		{"a/../..", "", protocol.ErrPathEscape},
		{"..", "", protocol.ErrPathEscape},
		{"../", "", protocol.ErrPathEscape},
		{"../etc/passwd", "", protocol.ErrPathEscape},
		{"a/b/../../../x", "", protocol.ErrPathEscape},
		{"..foo", "..foo", nil},
		{"...", "...", nil},
		{"a/..b", "a/..b", nil},
		{"/workspace", ".", nil},
		{"/workspace/", ".", nil},
		{"/workspace/.", ".", nil},
		{"/workspace/a", "a", nil},
		{"/workspace//a/", "a", nil},
		{"//workspace/a", "a", nil},
		{"/workspace/a/../b", "b", nil},
		{"/workspace/..", "", protocol.ErrPathEscape},
		{"/workspace/../etc/passwd", "", protocol.ErrPathEscape},
		{"/workspace/a/../../etc", "", protocol.ErrPathEscape},
		{"/workspacex/a", "", protocol.ErrPathEscape},
		{"/workspacex", "", protocol.ErrPathEscape},
		{"/work", "", protocol.ErrPathEscape},
		{"/etc", "", protocol.ErrPathEscape},
		{"/etc/passwd", "", protocol.ErrPathEscape},
		{"/", "", protocol.ErrPathEscape},
		{"/proc/1/environ", "", protocol.ErrPathEscape},
		{"a\x00b", "", protocol.ErrInvalid},
		{"/workspace/a\x00", "", protocol.ErrInvalid},
		{"\x00", "", protocol.ErrInvalid},
		{long, "", protocol.ErrInvalid},
		{"/workspace/" + long, "", protocol.ErrInvalid},
		{maxOK, maxOK, nil},
		{maxOK + "c", "", protocol.ErrInvalid},
		{"a//b/./c", "a/b/c", nil},
		{"a/./b/.//c/", "a/b/c", nil},
	}
	for _, c := range cases {
		name := c.in
		if len(name) > 40 {
			name = fmt.Sprintf("%.20s...(%d bytes)", name, len(c.in))
		}
		t.Run(fmt.Sprintf("%q", name), func(t *testing.T) {
			got, err := rel(c.in)
			if c.err == nil {
				if err != nil || got != c.want {
					t.Fatalf("rel(%q) = %q, %v; want %q", name, got, err, c.want)
				}
				if strings.HasPrefix(got, "/") || got == ".." || strings.HasPrefix(got, "../") {
					t.Fatalf("rel(%q) = %q is not a clean relative path", name, got)
				}
				return
			}
			if !errors.Is(err, c.err) {
				t.Fatalf("rel(%q) = %q, %v; want error %v", name, got, err, c.err)
			}
			if got != "" {
				t.Fatalf("rel(%q) returned a path %q along with its error", name, got)
			}
			if c.err == protocol.ErrPathEscape && !strings.Contains(err.Error(), c.in) {
				t.Errorf("error %q does not name the path %q", err, c.in)
			}
			if len(err.Error()) > 2*maxPathLen {
				t.Errorf("error message is %d bytes long", len(err.Error()))
			}
		})
	}
}

func TestDisplay(t *testing.T) {
	for in, want := range map[string]string{".": "/workspace", "a": "/workspace/a", "a/b": "/workspace/a/b"} {
		if got := display(in); got != want {
			t.Errorf("display(%q) = %q, want %q", in, got, want)
		}
	}
	// rel and display are inverse for every valid spelling.
	for _, in := range []string{".", "a", "/workspace/x/y", "x//y/", "/workspace"} {
		r, err := rel(in)
		if err != nil {
			t.Fatal(err)
		}
		back, err := rel(display(r))
		if err != nil || back != r {
			t.Errorf("rel(display(rel(%q))) = %q, %v; want %q", in, back, err, r)
		}
	}
}

func TestCwd(t *testing.T) {
	var ws workspace
	cases := []struct {
		in, want string
		err      error
	}{
		{"", "/workspace", nil},
		{"sub", "/workspace/sub", nil},
		{"sub/../x/", "/workspace/x", nil},
		{"/workspace/sub", "/workspace/sub", nil},
		{"/tmp", "/tmp", nil},
		{"a\x00b", "", protocol.ErrInvalid},
		{strings.Repeat("d/", 3000), "", protocol.ErrInvalid},
	}
	for _, c := range cases {
		got, err := ws.cwd(c.in)
		if c.err != nil {
			if !errors.Is(err, c.err) {
				t.Errorf("cwd(%.20q) = %q, %v; want %v", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("cwd(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

func TestErrnoError(t *testing.T) {
	cases := []struct {
		errno unix.Errno
		want  error
	}{
		{unix.EXDEV, protocol.ErrPathEscape},
		{unix.ELOOP, protocol.ErrPathEscape},
		{unix.ENOENT, protocol.ErrNotFound},
		{unix.EACCES, protocol.ErrPermission},
		{unix.EPERM, protocol.ErrPermission},
		{unix.EROFS, protocol.ErrPermission},
		{unix.ENOTDIR, protocol.ErrNotDir},
		{unix.EISDIR, protocol.ErrIsDir},
		{unix.EEXIST, protocol.ErrExists},
		{unix.ENOTEMPTY, protocol.ErrNotEmpty},
		{unix.ENOSPC, protocol.ErrNoSpace},
		{unix.EDQUOT, protocol.ErrNoSpace},
		{unix.EFBIG, protocol.ErrTooLarge},
		{unix.ENXIO, protocol.ErrNotRegular},
		{unix.ENODEV, protocol.ErrNotRegular},
		{unix.ENAMETOOLONG, protocol.ErrInvalid},
		{unix.EINVAL, protocol.ErrInvalid},
		{unix.EIO, protocol.ErrInternal},
	}
	for _, c := range cases {
		err := errnoError(fmt.Errorf("op: %w", c.errno), "/workspace/some/file")
		if !errors.Is(err, c.want) {
			t.Errorf("%v: got %v, want %v", c.errno, err, c.want)
		}
		if !strings.Contains(err.Error(), "/workspace/some/file") {
			t.Errorf("%v: %q does not name the path", c.errno, err)
		}
		// The code survives the control channel.
		back := protocol.FromWire(protocol.ToWire(err))
		if !errors.Is(back, c.want) || back.Error() != err.Error() {
			t.Errorf("%v: over the wire %q became %q (%v)", c.errno, err, back, back)
		}
	}
}

func TestNotRegularNamesTheType(t *testing.T) {
	cases := []struct {
		mode uint32
		want error
		typ  string
	}{
		{unix.S_IFDIR | 0o755, protocol.ErrIsDir, "dir"},
		{unix.S_IFIFO | 0o644, protocol.ErrNotRegular, "fifo"},
		{unix.S_IFSOCK | 0o644, protocol.ErrNotRegular, "socket"},
		{unix.S_IFCHR | 0o644, protocol.ErrNotRegular, "device"},
		{unix.S_IFBLK | 0o644, protocol.ErrNotRegular, "device"},
		{unix.S_IFLNK | 0o777, protocol.ErrNotRegular, "symlink"},
	}
	for _, c := range cases {
		err := notRegular("/workspace/p", c.mode)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), "/workspace/p") {
			t.Errorf("mode %o: %v, want %v naming the path", c.mode, err, c.want)
		}
		if got := typeName(c.mode); got != c.typ {
			t.Errorf("typeName(%o) = %q, want %q", c.mode, got, c.typ)
		}
	}
	if got := typeName(unix.S_IFREG | 0o644); got != "file" {
		t.Errorf("typeName(regular) = %q", got)
	}
}

func TestSplitPath(t *testing.T) {
	cases := map[string]string{".": "", "a": "a", "a/b/c": "a|b|c"}
	for in, want := range cases {
		if got := strings.Join(splitPath(in), "|"); got != want {
			t.Errorf("splitPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// A file operation's thread takes the sandbox user's fs identity and gives
// it back, each of which clears a thread's parent-death signal; the
// agent's main thread can be one of them, and the agent must still die
// with its launcher.
func TestUserFSIdentityKeepsParentDeathSignal(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (CI runs as root)")
	}
	got := make(chan string, 2)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread is discarded
		var sig int
		if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
			got <- err.Error()
			return
		}
		if err := takeUserFSIdentity(); err != nil {
			got <- err.Error()
			return
		}
		unix.Prctl(unix.PR_GET_PDEATHSIG, uintptr(unsafe.Pointer(&sig)), 0, 0, 0)
		fsuid, _ := unix.SetfsuidRetUid(-1)
		got <- fmt.Sprintf("fsuid %d, parent-death signal %d", fsuid, sig)
		if err := setFSIdentity(0, 0); err != nil {
			got <- err.Error()
			return
		}
		sig = 0
		unix.Prctl(unix.PR_GET_PDEATHSIG, uintptr(unsafe.Pointer(&sig)), 0, 0, 0)
		fsuid, _ = unix.SetfsuidRetUid(-1)
		fsgid, _ := unix.SetfsgidRetGid(-1)
		got <- fmt.Sprintf("fsuid %d fsgid %d, parent-death signal %d", fsuid, fsgid, sig)
	}()
	want := fmt.Sprintf("fsuid %d, parent-death signal %d", SandboxUID, unix.SIGKILL)
	if g := <-got; g != want {
		t.Fatalf("after takeUserFSIdentity: %s, want %s", g, want)
	}
	want = fmt.Sprintf("fsuid 0 fsgid 0, parent-death signal %d", unix.SIGKILL)
	if g := <-got; g != want {
		t.Fatalf("after setFSIdentity(0, 0): %s, want %s", g, want)
	}
}
