package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
)

// leaves names per-process cgroups. Those that still had members
// (background processes) when their command ended linger until empty.
type leaves struct {
	seq       atomic.Uint64
	mu        sync.Mutex
	lingering map[string]bool
	kick      chan struct{} // a leaf began to linger (sweepLeaves)
}

// place moves a stopped new process into the computer's cgroups: every
// placement hierarchy, and a fresh leaf of its own for tracking descendants.
func (s *Server) place(p *process) error {
	cg := s.init.Cgroup
	pid := strconv.Itoa(p.getPid())
	for _, fd := range cg.Place {
		if cg.TrackPlaces && fd == cg.Track {
			continue
		}
		if err := writeAt(fd, "cgroup.procs", pid); err != nil {
			return fmt.Errorf("%w: join cgroup: %v", protocol.ErrInternal, err)
		}
	}
	if cg.Track <= 0 {
		if len(cg.Place) == 0 {
			// A pod's agent (podagent): it shares the container's memory
			// cgroup with user code, so user code goes first when the
			// limit is reached. Raising a score needs no privilege.
			os.WriteFile("/proc/"+pid+"/oom_score_adj", []byte("1000"), 0)
		}
		return nil
	}
	leaf := "p" + strconv.FormatUint(s.leaves.seq.Add(1), 10)
	if err := unix.Mkdirat(cg.Track, leaf, 0o755); err != nil {
		return fmt.Errorf("%w: create process cgroup: %v", protocol.ErrInternal, err)
	}
	p.mu.Lock()
	p.leaf = leaf
	p.mu.Unlock()
	if err := writeAt(cg.Track, leaf+"/cgroup.procs", pid); err != nil {
		return fmt.Errorf("%w: join process cgroup: %v", protocol.ErrInternal, err)
	}
	return nil
}

func writeAt(dirfd int, name, value string) error {
	fd, err := unix.Openat(dirfd, name, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	_, err = unix.Write(fd, []byte(value))
	return err
}

// leafPids lists the members of a process leaf.
func (s *Server) leafPids(leaf string) []int {
	fd, err := unix.Openat(s.init.Cgroup.Track, leaf+"/cgroup.procs", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(fd)
	var sb strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := unix.Read(fd, buf)
		if n <= 0 || err != nil {
			break
		}
		sb.Write(buf[:n])
	}
	var pids []int
	for _, f := range strings.Fields(sb.String()) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
			pids = append(pids, pid)
		}
	}
	return pids
}

// killTree kills a process and every descendant, wherever they moved in the
// process-group or session space: membership of its cgroup leaf is
// inherited on fork and cannot be left by unprivileged code.
func (s *Server) killTree(p *process) {
	p.mu.Lock()
	p.killed = true
	pid, leaf := p.pid, p.leaf
	p.mu.Unlock()
	defer s.reg.killed()
	if pid > 0 {
		unix.Kill(-pid, unix.SIGKILL)
		unix.Kill(pid, unix.SIGKILL)
	}
	if leaf == "" {
		return
	}
	if s.init.Cgroup.Kill {
		if writeAt(s.init.Cgroup.Track, leaf+"/cgroup.kill", "1") == nil {
			return
		}
	}
	// Without cgroup.kill, repeat until the leaf is empty: a fork racing the
	// first sweep is caught by the next. The pids limit bounds the rounds.
	for round := 0; round < 200; round++ {
		pids := s.leafPids(leaf)
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			unix.Kill(pid, unix.SIGKILL)
		}
		time.Sleep(time.Millisecond)
	}
}

// releaseLeaf removes a process leaf, or remembers it while background
// processes still live in it.
func (s *Server) releaseLeaf(leaf string) {
	if leaf == "" {
		return
	}
	err := unix.Unlinkat(s.init.Cgroup.Track, leaf, unix.AT_REMOVEDIR)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return
	}
	s.leaves.mu.Lock()
	if s.leaves.lingering == nil {
		s.leaves.lingering = make(map[string]bool)
	}
	s.leaves.lingering[leaf] = true
	s.leaves.mu.Unlock()
	select {
	case s.leaves.kick <- struct{}{}:
	default:
	}
}

// sweepLeaves removes lingering leaves once empty, every 2 s while there
// are any; with none it sleeps, so an idle agent never wakes up.
func (s *Server) sweepLeaves(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.leaves.kick:
		}
		for left := true; left; {
			select {
			case <-ctx.Done():
				return
			case <-time.After(2 * time.Second):
			}
			left = s.sweepOnce()
		}
	}
}

// sweepOnce removes the lingering leaves that are empty and reports
// whether some are left.
func (s *Server) sweepOnce() bool {
	s.leaves.mu.Lock()
	defer s.leaves.mu.Unlock()
	for leaf := range s.leaves.lingering {
		err := unix.Unlinkat(s.init.Cgroup.Track, leaf, unix.AT_REMOVEDIR)
		if err == nil || errors.Is(err, unix.ENOENT) {
			delete(s.leaves.lingering, leaf)
		}
	}
	return len(s.leaves.lingering) > 0
}

// memoryLimit is the memory limit in force on the computer's cgroup (it
// can change while the computer runs: a claimed pool computer), or
// init.MemoryHint when it cannot be read.
func (s *Server) memoryLimit() int64 {
	for _, fd := range s.init.Cgroup.Place {
		for _, name := range []string{"memory.max", "memory.limit_in_bytes"} {
			f, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				continue
			}
			var b [32]byte
			n, _ := unix.Read(f, b[:])
			unix.Close(f)
			if v, err := strconv.ParseInt(strings.TrimSpace(string(b[:max(n, 0)])), 10, 64); err == nil {
				return v
			}
		}
	}
	return s.init.MemoryHint
}
