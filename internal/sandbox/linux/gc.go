package linux

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/opencontainers/cgroups"
	"golang.org/x/sys/unix"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/linux/disk"
)

// GC removes computers whose owner died (its lock is free): their agent and
// processes, cgroups, loop devices, mounts and directories. Kept computers
// (cubicle run --keep) stay until RemoveKept.
func (d *Driver) GC(ctx context.Context) (sandbox.GCReport, error) {
	return d.gc(ctx, false)
}

// RemoveKept removes kept computers too.
func (d *Driver) RemoveKept(ctx context.Context) (sandbox.GCReport, error) {
	return d.gc(ctx, true)
}

func (d *Driver) gc(ctx context.Context, kept bool) (sandbox.GCReport, error) {
	var rep sandbox.GCReport
	entries, err := os.ReadDir(d.computers)
	if err != nil {
		return rep, fmt.Errorf("gc: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
		if !e.IsDir() {
			continue
		}
		if err := d.collect(computerDir(filepath.Join(d.computers, e.Name())), kept, &rep); err != nil {
			errs = append(errs, err)
		}
	}
	n, err := disk.DetachOrphans(d.computers)
	rep.Loops += n
	if err != nil {
		errs = append(errs, err)
	}
	// Images that a process ended before unlinking (Discard).
	if _, err := d.templates.RemoveDiscarded(); err != nil {
		errs = append(errs, err)
	}
	return rep, errors.Join(errs...)
}

func (d *Driver) collect(dir computerDir, kept bool, rep *sandbox.GCReport) error {
	lock, err := dir.lock(false)
	if errors.Is(err, errOwnerAlive) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("gc %s: %w", dir, err)
	}
	defer lock.Close()
	rec, err := dir.read()
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		d.log.Warn("gc: unreadable record; removing the directory anyway", "dir", dir, "err", err)
	}
	if rec.Kept && !kept {
		return nil
	}
	if rec.AgentPid > 0 {
		killAgent(rec.AgentPid, rec.AgentStart)
	}
	for _, p := range rec.Cgroups {
		killCgroup(p)
	}
	if len(rec.Cgroups) > 0 {
		u := &userCgroup{paths: rec.Cgroups}
		if err := u.destroy(); err != nil {
			return fmt.Errorf("gc %s: remove cgroup: %w", dir, err)
		}
		rep.Cgroups++
	}
	n, err := unmountUnder(string(dir))
	rep.Mounts += n
	if err != nil {
		return fmt.Errorf("gc %s: %w", dir, err)
	}
	if err := os.RemoveAll(string(dir)); err != nil {
		return fmt.Errorf("gc %s: %w", dir, err)
	}
	rep.Computers++
	return nil
}

// killAgent kills an orphaned agent, unless the pid was reused since.
func killAgent(pid int, start uint64) {
	if got, err := procStart(pid); err != nil || got != start {
		return
	}
	unix.Kill(pid, unix.SIGKILL)
	for i := 0; i < 3000; i++ {
		if got, err := procStart(pid); err != nil || got != start {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

func killCgroup(path string) {
	for i := 0; i < 100; i++ {
		pids, err := cgroups.GetAllPids(path)
		if err != nil || len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			unix.Kill(pid, unix.SIGKILL)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// unmountUnder lazily unmounts every mount point below dir, deepest first.
func unmountUnder(dir string) (int, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 {
			mp := unescapeMount(fields[4])
			if mp == dir || strings.HasPrefix(mp, dir+"/") {
				points = append(points, mp)
			}
		}
	}
	n := 0
	for i := len(points) - 1; i >= 0; i-- {
		if err := unix.Unmount(points[i], unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			return n, fmt.Errorf("unmount %s: %w", points[i], err)
		}
		n++
	}
	return n, nil
}

// unescapeMount decodes mountinfo's octal escapes (\040 for a space...).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v byte
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &v); err == nil {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
