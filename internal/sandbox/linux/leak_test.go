package linux_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opencontainers/cgroups"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/linux"
)

// footprint is everything a computer could leak on the host.
type footprint struct {
	cgroups, mounts, agents, entries, fds, loops int
}

// measure counts what exists on the host for the computers in ids (other
// tests may run computers concurrently, so only ours are counted).
func measure(t *testing.T, stateDir string, ids []string) footprint {
	t.Helper()
	var f footprint
	for _, c := range []string{"memory", "pids", "cpu", "cpuacct"} {
		own, err := cgroups.GetOwnCgroupPath(c)
		if err != nil {
			t.Fatalf("own cgroup %s: %v", c, err)
		}
		for _, id := range ids {
			if _, err := os.Stat(filepath.Join(own, "cubicle", id)); err == nil {
				f.cgroups++
			}
		}
	}
	b, _ := os.ReadFile("/proc/self/mountinfo")
	f.mounts = bytes.Count(b, []byte(stateDir))
	for _, pid := range agentPids(t) {
		if ours(pid) {
			f.agents++
		}
	}
	ents, _ := os.ReadDir(filepath.Join(stateDir, "computers"))
	f.entries = len(ents)
	fds, _ := os.ReadDir("/proc/self/fd")
	f.fds = len(fds)
	loops, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, l := range loops {
		if b, err := os.ReadFile(l); err == nil && strings.HasPrefix(string(b), stateDir) {
			f.loops++
		}
	}
	return f
}

// agentPids finds running agents started from this test's binary.
func agentPids(t *testing.T) []int {
	t.Helper()
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && bytes.Equal(b, []byte("cubicle\x00agent\x00")) {
			if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// TestNoLeaksOver200Cycles creates, uses and destroys (half of them killed
// first) 200 computers and asserts that nothing is left: cgroups, mounts,
// processes, directories, descriptors, loop devices.
func TestNoLeaksOver200Cycles(t *testing.T) {
	state := t.TempDir()
	d, err := linux.New(linux.Config{StateDir: state, AgentPath: agentBin})
	if err != nil {
		t.Fatal(err)
	}
	spec := sandbox.DefaultSpec()
	spec.DiskBytes = 32 << 20
	ctx := context.Background()
	var ids []string
	cycle := func() {
		sb, err := d.Create(ctx, spec)
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		ids = append(ids, sb.ID())
		st, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "echo x > /workspace/f; sleep 100 >/dev/null 2>&1 &"}, sandbox.ExecIO{})
		if err != nil || st.ExitCode != 0 {
			t.Fatalf("exec: %v %+v", err, st)
		}
		if len(ids)%2 == 0 { // half the cycles go the way the server does: kill, then destroy
			if err := sb.Kill(ctx); err != nil {
				t.Fatalf("kill: %v", err)
			}
		}
		if err := sb.Destroy(ctx); err != nil {
			t.Fatalf("destroy: %v", err)
		}
	}
	cycle() // warm up: the disk template and lazily opened descriptors
	before := measure(t, state, ids)
	for i := 0; i < 200; i++ {
		cycle()
	}
	var after footprint
	for i := 0; i < 100; i++ { // loop devices detach asynchronously on some kernels
		if after = measure(t, state, ids); after == before {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if after != before {
		t.Fatalf("leaked: before %+v, after %+v", before, after)
	}
}

// killedRun starts a `cubicle run` on state and SIGKILLs it once its
// computer runs, leaving the computer to GC.
func killedRun(t *testing.T, state string) (pid int) {
	t.Helper()
	cmd := exec.Command(agentBin, "run", "--data", state, "--disk", "32M", "--", "sh", "-c", "echo started; sleep 1000")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "started\n" {
		t.Fatalf("computer did not start: %q %v", line, err)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	return cmd.Process.Pid
}

// TestGCAfterKilledOwner kills a `cubicle run` with SIGKILL while its
// computer runs, and checks that GC removes everything it left behind.
func TestGCAfterKilledOwner(t *testing.T) {
	state := t.TempDir()
	owner := killedRun(t, state)

	d, err := linux.New(linux.Config{StateDir: state, AgentPath: agentBin})
	if err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(filepath.Join(state, "computers"))
	if len(ents) != 1 {
		t.Fatalf("expected the killed run's computer directory, found %d", len(ents))
	}
	ids := []string{ents[0].Name()}
	// The run's launcher and its agent died with it, before any GC.
	agent := agentPidOf(t, state, ids[0])
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		alive := strings.HasPrefix(cmdline(agent), "cubicle agent")
		for _, pid := range launcherPids() {
			alive = alive || ppid(pid) == owner || ppid(pid) == 1
		}
		if !alive {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the killed run's agent %d (%q) or launcher still alive", agent, cmdline(agent))
		}
	}
	if left := measure(t, state, ids); left.cgroups != 4 {
		t.Fatalf("expected the killed run's cgroups in 4 hierarchies before gc, found %+v", left)
	}
	rep, err := d.GC(context.Background())
	if err != nil {
		t.Fatalf("gc: %v", err)
	}
	if rep.Computers != 1 || rep.Cgroups != 1 {
		t.Errorf("gc report %+v, want 1 computer and 1 cgroup", rep)
	}
	after := measure(t, state, ids)
	if after.entries != 0 || after.loops != 0 || after.mounts != 0 || after.cgroups != 0 {
		t.Errorf("left behind after gc: %+v", after)
	}
	for _, pid := range agentPids(t) {
		if ppid(pid) == owner {
			t.Errorf("agent %d of the killed run still alive", pid)
		}
	}
}

// launcherPids finds running launchers.
func launcherPids() []int {
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && bytes.Equal(b, []byte("cubicle\x00launcher\x00")) {
			if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// ours reports whether agent pid was started by this process's launcher.
func ours(pid int) bool {
	launcher := ppid(pid)
	return launcher > 0 && ppid(launcher) == os.Getpid()
}

func ppid(pid int) int {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return -1
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	p, _ := strconv.Atoi(fields[1])
	return p
}
