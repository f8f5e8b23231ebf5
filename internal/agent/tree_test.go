package agent

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
)

// A listing's cursor is the path's components below the directory; a
// path elsewhere, the directory itself or one escaping is refused.
func TestWalkCursor(t *testing.T) {
	for _, c := range []struct {
		dir, after string
		want       []string
	}{
		{".", "/workspace/a/b", []string{"a", "b"}},
		{".", "a", []string{"a"}},
		{"src", "/workspace/src/lib/x.go", []string{"lib", "x.go"}},
		{"src", "src/a", []string{"a"}},
	} {
		got, err := walkCursor(c.dir, c.after)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("walkCursor(%q, %q) = %q, %v; want %q", c.dir, c.after, got, err, c.want)
		}
	}
	for _, c := range [][2]string{{".", "/workspace"}, {"src", "/workspace/src"}, {"src", "srcx/a"}, {"src", "/etc/passwd"}, {"src", "../x"}, {"src", ""}} {
		if _, err := walkCursor(c[0], c[1]); !errors.Is(err, protocol.ErrInvalid) {
			t.Errorf("walkCursor(%q, %q): %v, want ErrInvalid", c[0], c[1], err)
		}
	}
}

// inotify's records are split with their names' NUL padding removed; a
// record cut short ends the parse.
func TestParseEvents(t *testing.T) {
	rec := func(wd int32, mask, cookie uint32, name string, pad int) []byte {
		b := make([]byte, unix.SizeofInotifyEvent+len(name)+pad)
		binary.NativeEndian.PutUint32(b[0:], uint32(wd))
		binary.NativeEndian.PutUint32(b[4:], mask)
		binary.NativeEndian.PutUint32(b[8:], cookie)
		binary.NativeEndian.PutUint32(b[12:], uint32(len(name)+pad))
		copy(b[16:], name)
		return b
	}
	var b []byte
	b = append(b, rec(1, unix.IN_CREATE, 0, "a.txt", 3)...)
	b = append(b, rec(2, unix.IN_MOVED_FROM, 7, "x", 0)...)
	b = append(b, rec(-1, unix.IN_Q_OVERFLOW, 0, "", 0)...)
	cut := rec(3, unix.IN_DELETE, 0, "cut", 5)
	b = append(b, cut[:len(cut)-2]...)
	got := parseEvents(b)
	want := []inotifyEvent{{1, unix.IN_CREATE, 0, "a.txt"}, {2, unix.IN_MOVED_FROM, 7, "x"}, {-1, unix.IN_Q_OVERFLOW, 0, ""}}
	if !slices.Equal(got, want) {
		t.Fatalf("parseEvents: %+v, want %+v", got, want)
	}
}
