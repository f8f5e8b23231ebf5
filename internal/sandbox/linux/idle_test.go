package linux_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/linux"
)

// maxIdleAgentThreads bounds what an idle computer's agent keeps (issue
// 15, goal 6): its main thread (the spawner), the one that runs its
// goroutines and waits in the netpoller, sysmon and the Go runtime's
// template thread (docs/ARCHITECTURE.md, "Threads"). Before, agents had
// 11 to 13, then six or seven (a thread parked by os/signal for SIGCHLD,
// and an idle one the trim could not end).
const maxIdleAgentThreads = 4

// TestIdleComputerThreads: an idle computer's agent has at most four
// threads, also after it ran processes and file operations, and the host
// holds no thread per computer: neither this process (the driver's) nor
// the launcher grows by one per computer (before, the launcher waited for
// each agent in a blocking waitid, one thread each; an agent had 11).
func TestIdleComputerThreads(t *testing.T) {
	d := newDriver(t)
	small := func(s *sandbox.Spec) { s.MemoryBytes, s.DiskBytes = 64<<20, sandbox.MinDisk }
	use := func(sb sandbox.Sandbox) {
		if r := run(t, sb, "echo hi > f && cat f"); r.ExitCode != 0 || r.Stdout != "hi\n" {
			t.Fatalf("exec: %+v", r)
		}
		if _, err := sb.Stat(t.Context(), "f"); err != nil {
			t.Fatalf("stat: %v", err)
		}
	}
	use(newComputer(t, d, small)) // the launcher runs, the driver has warmed up
	time.Sleep(500 * time.Millisecond)
	self, launcher := threads(t, os.Getpid()), threads(t, linux.LauncherPid())

	const n = 20
	for range n {
		use(newComputer(t, d, small))
	}
	time.Sleep(2*time.Second + 500*time.Millisecond) // idle, and trimmed (agent.trimAfter)
	agents := children(linux.LauncherPid())
	if len(agents) != n+1 {
		t.Fatalf("%d agents, want %d", len(agents), n+1)
	}
	counts := make([]int, len(agents))
	for i, pid := range agents {
		counts[i] = threads(t, pid)
	}
	t.Logf("idle agents' threads: %v", counts)
	// A loaded host may delay a trim: look at those above the bound again,
	// once, a little later.
	var over []int
	for i, pid := range agents {
		if counts[i] > maxIdleAgentThreads {
			over = append(over, pid)
		}
	}
	if len(over) > 0 {
		time.Sleep(1500 * time.Millisecond)
	}
	for _, pid := range over {
		if got := threads(t, pid); got > maxIdleAgentThreads {
			t.Errorf("idle agent %d has %d threads, want at most %d", pid, got, maxIdleAgentThreads)
		}
	}
	// A thread per computer would add n; allow the Go runtime's own
	// growth (threads it keeps after a burst of blocking system calls).
	grew := threads(t, os.Getpid()) - self + threads(t, linux.LauncherPid()) - launcher
	if grew >= n/2 {
		t.Errorf("this process and the launcher have %d more threads with %d more computers, want fewer than %d", grew, n, n/2)
	}
}

// TestOrphansReaped: orphans (re-parented to the agent, PID 1) that end
// while nothing else happens in the computer are reaped all the same: the
// agent has no SIGCHLD receiver (it would hold a thread), so a drain on a
// timer reaps them while it has children (internal/agent/reaper.go).
func TestOrphansReaped(t *testing.T) {
	sb, agent := computerAndAgent(t, nil)
	if r := run(t, sb, "(sleep 2 &); (sleep 2 &); echo ok"); r.ExitCode != 0 || r.Stdout != "ok\n" {
		t.Fatalf("exec: %+v", r)
	}
	if kids := children(agent); len(kids) != 2 {
		t.Fatalf("the agent's children %v, want the two orphans", kids)
	}
	// They end 2 s after their start, when nothing else ends: a drain
	// follows within the timer's longest period (5 s).
	deadline := time.Now().Add(10 * time.Second)
	for len(children(agent)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the agent's children %v were not reaped", children(agent))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// threads counts a process's threads.
func threads(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "task"))
	if err != nil {
		t.Fatalf("threads of %d: %v", pid, err)
	}
	return len(ents)
}

// children lists a process's children.
func children(pid int) []int {
	files, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "children"))
	var out []int
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, s := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(s); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}
