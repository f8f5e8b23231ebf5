package linux

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// pfExiting is PF_EXITING of a task's flags (field 9 of /proc/pid/stat): set
// by the kernel when the task enters do_exit, after its last system call
// returned. From then on the task never runs user code again.
const pfExiting = 0x4

// killTimeout bounds the wait for a computer's processes to stop running.
const killTimeout = 30 * time.Second

// maxKillPause caps the pause between two scans of a computer's tasks: they
// need CPU to reach their exit, which scanning too often (50 computers
// deleted at once) would take from them.
const maxKillPause = 8 * time.Millisecond

// openPIDs opens the computer's own /proc (its PID namespace's) through the
// agent's root, before any user code ran. Listing it shows every task of the
// computer, wherever in the cgroups it is, even after the agent died.
func openPIDs(agentPid int) (*os.File, error) {
	f, err := os.OpenFile(fmt.Sprintf("/proc/%d/root/proc", agentPid), os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, fmt.Errorf("open the computer's /proc: %w", err)
	}
	return f, nil
}

// signal SIGKILLs every process of the computer: the user cgroup's, and the
// agent, whose death takes the rest of its PID namespace with it.
func (c *computer) signal() {
	if c.net != nil {
		c.net.Close() // first: no new connection, every open one ends
	}
	if c.cg != nil {
		c.cg.lift()
		c.cg.kill()
	}
	if c.proc != nil {
		c.proc.kill()
	}
}

// waitStopped returns once no task of the computer can run code again:
// every one is exiting (PF_EXITING) or dead, in two scans in a row with no
// task appearing in between (a fork that raced the first scan shows in the
// second). It does not wait for the kernel to finish the exits (freeing
// address spaces, unmounting the workspace): that is Destroy's part.
func (c *computer) waitStopped(ctx context.Context) error {
	if c.pids == nil {
		return c.waitReaped(ctx)
	}
	ctx, cancel := context.WithTimeout(ctx, killTimeout)
	defer cancel()
	var prev map[int]bool
	pause := 200 * time.Microsecond
	for {
		tasks, running, err := scanTasks(c.pids)
		if err != nil {
			return fmt.Errorf("kill %s: %w", c.id, err)
		}
		if running == 0 && subset(tasks, prev) {
			return nil
		}
		if running > 0 {
			select {
			case <-c.done: // the agent was reaped: its PID namespace is empty
				return nil
			case <-ctx.Done():
				return fmt.Errorf("kill %s: %d tasks still running: %w", c.id, running, ctx.Err())
			case <-time.After(pause):
			}
			pause = min(2*pause, maxKillPause)
		}
		prev = tasks
	}
}

// waitReaped waits for the agent's exit, which the kernel completes only
// after every other task of its PID namespace is gone.
func (c *computer) waitReaped(ctx context.Context) error {
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("agent of %s did not exit: %w", c.id, ctx.Err())
	case <-time.After(killTimeout):
		return fmt.Errorf("agent of %s did not exit within %v", c.id, killTimeout)
	}
}

// subset reports whether every key of a is in b (b nil: only if a is empty).
func subset(a, b map[int]bool) bool {
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// scanTasks lists the threads of a PID namespace's /proc (namespace-local
// ids) and counts those that can still run code.
func scanTasks(procDir *os.File) (tasks map[int]bool, running int, err error) {
	root := int(procDir.Fd())
	tasks = map[int]bool{}
	pids, err := listNumeric(root, ".")
	if err != nil {
		return nil, 0, err
	}
	for _, pid := range pids {
		tids, err := listNumeric(root, strconv.Itoa(pid)+"/task")
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH) {
			continue // reaped meanwhile
		}
		if err != nil {
			return nil, 0, err
		}
		for _, tid := range tids {
			b, err := readAt(root, fmt.Sprintf("%d/task/%d/stat", pid, tid))
			if err != nil {
				continue // reaped meanwhile
			}
			st, err := parseStat(b)
			if err != nil {
				return nil, 0, err
			}
			tasks[tid] = true
			if st.alive() {
				running++
			}
		}
	}
	return tasks, running, nil
}

// listNumeric lists the numeric entries of directory name under dirfd.
func listNumeric(dirfd int, name string) ([]int, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	d := os.NewFile(uintptr(fd), name)
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	var ids []int
	for _, n := range names {
		if id, err := strconv.Atoi(n); err == nil {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// readAt reads a small file (a /proc stat) relative to dirfd.
func readAt(dirfd int, name string) ([]byte, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	buf := make([]byte, 4096)
	n, err := unix.Read(fd, buf)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}
