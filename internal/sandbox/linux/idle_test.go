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

// maxIdleAgentThreads bounds what an idle computer's agent keeps. It has
// six, sometimes seven: its main thread (the spawner), the one that runs
// its goroutines, sysmon, the Go runtime's template thread, the one
// os/signal keeps parked for SIGCHLD, and an idle one or two that the trim
// could not end without the runtime starting another (docs/ARCHITECTURE.md,
// "Threads"). The bound has a margin for a loaded host; before, agents had
// 11 to 13.
const maxIdleAgentThreads = 8

// TestIdleComputerThreads: an idle computer's agent has few threads (six,
// at most eight), also after it ran processes and file operations, and the host
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
	for _, pid := range agents {
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
