package linux_test

import (
	"os"
	"strings"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox/linux"
)

// hostRoot returns the source and type of the host's / mount.
func hostRoot(t *testing.T) (source, fstype string) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if f, a := strings.Fields(pre), strings.Fields(post); ok && len(f) >= 5 && f[4] == "/" && len(a) >= 2 {
			fstype, source = a[0], a[1]
		}
	}
	if source == "" {
		t.Fatal("no / in the host's mountinfo")
	}
	return source, fstype
}

// TestMountinfoIsNeutral: /proc/self/mountinfo inside a computer names no
// host device (the host disk, loop devices, devtmpfs), no path of the data
// directory and no host path other than the one a mount shows at its own
// place: every mount source is one of a neutral set, every root is "/",
// its own mount point, or (in /proc) the computer's own proc or /dev, and
// no super option holds a path (docs/ARCHITECTURE.md, "What mountinfo
// shows").
func TestMountinfoIsNeutral(t *testing.T) {
	state := t.TempDir()
	d, err := linux.New(linux.Config{StateDir: state, AgentPath: agentBin})
	if err != nil {
		t.Fatal(err)
	}
	hostSource, hostType := hostRoot(t)
	sb := newComputer(t, d, nil)
	info := mustSucceed(t, sb, "cat /proc/self/mountinfo")
	for _, bad := range []string{hostSource, state, "/dev/vd", "/dev/sd", "/dev/nvme", "/dev/loop", "/dev/mapper",
		"devtmpfs", "udev", "/var/", "/tmp/Test"} {
		if strings.Contains(info, bad) {
			t.Errorf("mountinfo names %q:\n%s", bad, info)
		}
	}
	sources := map[string]bool{"tmpfs": true, "shm": true, "devpts": true, "proc": true, "runtime": true, "workspace": true}
	types := map[string]bool{"tmpfs": true, "devpts": true, "proc": true, "ext4": true, hostType: true}
	devID := ""
	for _, line := range strings.Split(strings.TrimSpace(info), "\n") {
		pre, post, _ := strings.Cut(line, " - ")
		f, a := strings.Fields(pre), strings.Fields(post)
		if len(f) < 6 || len(a) != 3 {
			t.Fatalf("malformed mountinfo line %q", line)
		}
		id, root, point := f[2], f[3], f[4]
		if point == "/dev" {
			devID = id
		}
		inProc := strings.HasPrefix(point, "/proc/")
		switch {
		case root == "/", root == point:
		case inProc && root == strings.TrimPrefix(point, "/proc"): // the computer's own proc
		case inProc && root == "/null" && id == devID: // masked with the computer's own /dev/null
		default:
			t.Errorf("%s: root %q reveals a path that is not its mount point", point, root)
		}
		if !sources[a[1]] {
			t.Errorf("%s: mount source %q is not neutral", point, a[1])
		}
		if !types[a[0]] {
			t.Errorf("%s: filesystem type %q", point, a[0])
		}
		if strings.Contains(a[2], "/") {
			t.Errorf("%s: super options %q hold a path", point, a[2])
		}
	}
	if t.Failed() {
		t.Logf("mountinfo:\n%s", info)
	}
}
