package linux_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/linux"
)

// hostProcess finds the host pid of the process whose command line is
// argv, and its real uid and gid on the host.
func hostProcess(t *testing.T, argv ...string) (pid, uid, gid int) {
	t.Helper()
	want := []byte(strings.Join(argv, "\x00") + "\x00")
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		dirs, _ := filepath.Glob("/proc/[0-9]*")
		for _, d := range dirs {
			if b, err := os.ReadFile(d + "/cmdline"); err != nil || !bytes.Equal(b, want) {
				continue
			}
			status, err := os.ReadFile(d + "/status")
			if err != nil {
				continue
			}
			pid, _ = strconv.Atoi(filepath.Base(d))
			for _, line := range strings.Split(string(status), "\n") {
				if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
					uid, _ = strconv.Atoi(f[1])
				} else if len(f) > 1 && f[0] == "Gid:" {
					gid, _ = strconv.Atoi(f[1])
				}
			}
			return pid, uid, gid
		}
	}
	t.Fatalf("no host process runs %q", argv)
	return
}

// TestComputersHaveOwnHostUIDs: user code is uid 1000 inside every
// computer, but on the host each computer's processes run as a uid of
// their own from the configured range, never 1000, so a host process of
// uid 1000 cannot signal them; inside, a computer's user namespace maps
// only root and its own user, and creating another one is refused.
func TestComputersHaveOwnHostUIDs(t *testing.T) {
	d := newDriver(t)
	seen := map[int]bool{}
	for i, sb := range []sandbox.Sandbox{newComputer(t, d, nil), newComputer(t, d, nil)} {
		if _, err := sb.WriteFile(context.Background(), sandbox.FileWrite{Path: "api"}, strings.NewReader("x")); err != nil {
			t.Fatal(err)
		}
		got := mustSucceed(t, sb, "id -u; id -g; stat -c %u:%g /workspace /workspace/api; touch /workspace/f; stat -c %u:%g /workspace/f")
		if got != "1000\n1000\n1000:1000\n1000:1000\n1000:1000\n" {
			t.Fatalf("identity inside (processes, the workspace, a file of the file API, a file of a process): %q", got)
		}
		arg := fmt.Sprintf("100%d.5", i)
		mustSucceed(t, sb, "sleep "+arg+" >/dev/null 2>&1 &")
		pid, uid, gid := hostProcess(t, "sleep", arg)
		if uid < linux.DefaultUIDStart || uid >= linux.DefaultUIDStart+linux.DefaultUIDCount || gid != uid || seen[uid] {
			t.Fatalf("computer %d's process runs as host uid %d gid %d (others: %v)", i, uid, gid, seen)
		}
		seen[uid] = true
		kill := exec.Command("/bin/kill", "-0", strconv.Itoa(pid))
		kill.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 1000, Gid: 1000}}
		if out, err := kill.CombinedOutput(); err == nil || !strings.Contains(string(out), "not permitted") {
			t.Fatalf("a host process of uid 1000 may signal the computer's process: %v %s", err, out)
		}
		want := fmt.Sprintf("0 0 1\n1000 %d 1\n", uid)
		if got := mustSucceed(t, sb, "tr -s ' ' < /proc/self/uid_map | sed 's/^ //'"); got != want {
			t.Fatalf("uid_map %q, want %q", got, want)
		}
		r := run(t, sb, "unshare -U true")
		if r.ExitCode == 0 || !strings.Contains(r.Stderr, "not permitted") {
			t.Fatalf("user code created a user namespace: %+v", r)
		}
		r = run(t, sb, `/usr/bin/python3 -c 'import os; os.unshare(os.CLONE_NEWUSER)'`)
		if r.ExitCode == 0 {
			t.Fatalf("python created a user namespace: %+v", r)
		}
	}
}

// TestHostUIDsAreNotShared: two drivers on one state directory (a server
// and `cubicle run`) never hand out the same host uid: with a range of one
// uid, the second computer waits for the first to be destroyed.
func TestHostUIDsAreNotShared(t *testing.T) {
	state := t.TempDir()
	drivers := make([]*linux.Driver, 2)
	for i := range drivers {
		d, err := linux.New(linux.Config{StateDir: state, AgentPath: agentBin, UIDStart: 1879000000, UIDCount: 1})
		if err != nil {
			t.Fatal(err)
		}
		drivers[i] = d
	}
	spec := sandbox.DefaultSpec()
	spec.DiskBytes = 64 << 20
	ctx := context.Background()
	first, err := drivers[0].Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if sb, err := drivers[1].Create(ctx, spec); err == nil || !strings.Contains(err.Error(), "in use") {
		if sb != nil {
			sb.Destroy(ctx)
		}
		t.Fatalf("second computer with a range of one uid: %v", err)
	}
	if err := first.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	second, err := drivers[1].Create(ctx, spec)
	if err != nil {
		t.Fatalf("after the first was destroyed: %v", err)
	}
	second.Destroy(ctx)
}

// TestHostUIDRangeChecked: a range holding a host user or group, uid 0 or
// the overflow id is refused when the driver starts.
func TestHostUIDRangeChecked(t *testing.T) {
	for _, r := range [][2]uint32{{1, 10}, {65000, 1000}, {4294967000, 1000}, {5, 0}} {
		_, err := linux.New(linux.Config{StateDir: t.TempDir(), AgentPath: agentBin, UIDStart: r[0], UIDCount: r[1]})
		if err == nil || !strings.Contains(err.Error(), "host uid range") {
			t.Errorf("range %d:%d: %v", r[0], r[1], err)
		}
	}
}

// TestHostUIDHeldUntilGC: the host uid of a computer whose owner was
// killed is not handed out again while that computer's directory exists
// (its leftovers, owned by that uid, are not yet collected); after GC it is.
func TestHostUIDHeldUntilGC(t *testing.T) {
	state := t.TempDir()
	killedRun(t, state)
	recs, _ := filepath.Glob(filepath.Join(state, "computers", "*", "computer.json"))
	if len(recs) != 1 {
		t.Fatalf("records of the killed run: %v", recs)
	}
	var rec struct {
		HostUID uint32 `json:"host_uid"`
	}
	if b, err := os.ReadFile(recs[0]); err != nil || json.Unmarshal(b, &rec) != nil || rec.HostUID == 0 {
		t.Fatalf("record %s: %v %+v", recs[0], err, rec)
	}
	d, err := linux.New(linux.Config{StateDir: state, AgentPath: agentBin, UIDStart: rec.HostUID, UIDCount: 1})
	if err != nil {
		t.Fatal(err)
	}
	spec := sandbox.DefaultSpec()
	spec.DiskBytes = 32 << 20
	ctx := context.Background()
	if sb, err := d.Create(ctx, spec); err == nil || !strings.Contains(err.Error(), "in use") {
		if sb != nil {
			sb.Destroy(ctx)
		}
		t.Fatalf("the dead computer's uid %d was handed out again before GC: %v", rec.HostUID, err)
	}
	if _, err := d.GC(ctx); err != nil {
		t.Fatal(err)
	}
	sb, err := d.Create(ctx, spec)
	if err != nil {
		t.Fatalf("after GC: %v", err)
	}
	sb.Destroy(ctx)
}
