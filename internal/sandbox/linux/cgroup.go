package linux

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/manager"
	"golang.org/x/sys/unix"

	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// cgroupParent is where computers' cgroups live, below the cgroup of the
// process that creates them (a systemd service's delegated subtree, or the
// shell's cgroup for the CLI).
const cgroupParent = "cubicle"

var cgroupSetMu sync.Mutex

// v1Controllers are the hierarchies a computer needs on cgroup v1 (the first
// three enforce limits; cpuacct accounts CPU time).
var v1Controllers = []string{"memory", "pids", "cpu", "cpuacct"}

// v2Controllers must be enabled (delegated) in the parent on cgroup v2.
var v2Controllers = []string{"memory", "pids", "cpu"}

// userCgroup is the cgroup that holds all user processes of one computer.
// The agent itself stays outside it, so the user's OOM and fork bombs never
// touch the agent.
type userCgroup struct {
	mgr   cgroups.Manager
	paths map[string]string // controller → directory ("" on v2)
	v2    bool
}

// cgroupPaths computes the user cgroup directories for computer id.
func cgroupPaths(id string) (map[string]string, bool, error) {
	rel := filepath.Join(cgroupParent, id, "user")
	if cgroups.IsCgroup2UnifiedMode() {
		own, err := ownV2Path()
		if err != nil {
			return nil, true, err
		}
		return map[string]string{"": filepath.Join(own, rel)}, true, nil
	}
	paths := make(map[string]string, len(v1Controllers))
	for _, c := range v1Controllers {
		own, err := cgroups.GetOwnCgroupPath(c)
		if err != nil {
			return nil, false, fmt.Errorf("%w: cgroup v1 controller %q is not mounted (mount it under /sys/fs/cgroup): %v",
				sandbox.ErrUnsupported, c, err)
		}
		paths[c] = filepath.Join(own, rel)
	}
	return paths, false, nil
}

func ownV2Path() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return filepath.Join("/sys/fs/cgroup", p), nil
		}
	}
	return "", fmt.Errorf("%w: no cgroup v2 entry in /proc/self/cgroup", sandbox.ErrUnsupported)
}

func resources(spec sandbox.Spec, v2 bool) *cgroups.Resources {
	r := &cgroups.Resources{
		Memory:      spec.MemoryBytes,
		MemorySwap:  spec.MemoryBytes, // no swap beyond the memory limit
		PidsLimit:   &spec.Pids,
		CpuShares:   1024,
		SkipDevices: true, // /dev is a minimal tmpfs; no cap to mknod
	}
	if spec.CPUs > 0 {
		r.CpuPeriod = 100000
		r.CpuQuota = int64(spec.CPUs * 100000)
	}
	if !v2 && !swapAccounted() {
		r.MemorySwap = 0 // no swap accounting on this host, so there is no swap to limit
	}
	return r
}

// swapAccounted says whether cgroup v1 accounts swap here
// (memory.memsw.limit_in_bytes exists).
var swapAccounted = sync.OnceValue(func() bool {
	own, _ := cgroups.GetOwnCgroupPath("memory")
	_, err := os.Stat(filepath.Join(own, "memory.memsw.limit_in_bytes"))
	return err == nil
})

// createUserCgroup makes the computer's user cgroup with its limits and
// verifies that every limit is in force; it refuses (ErrUnsupported) when the
// host cannot enforce one.
func createUserCgroup(id string, spec sandbox.Spec) (*userCgroup, error) {
	paths, v2, err := cgroupPaths(id)
	if err != nil {
		return nil, err
	}
	if v2 {
		if err := delegateV2(filepath.Dir(paths[""])); err != nil {
			return nil, err
		}
	}
	res := resources(spec, v2)
	cfg := &cgroups.Cgroup{Resources: res}
	mgr, err := manager.NewWithPaths(cfg, paths)
	if err != nil {
		return nil, fmt.Errorf("%w: cgroup manager: %v", sandbox.ErrUnsupported, err)
	}
	ucg := &userCgroup{mgr: mgr, paths: paths, v2: v2}
	if err := mgr.Apply(-1); err != nil {
		ucg.destroy()
		return nil, fmt.Errorf("%w: create cgroup %v: %v", sandbox.ErrUnsupported, paths, err)
	}
	if err := ucg.set(spec); err != nil {
		ucg.destroy()
		return nil, err
	}
	return ucg, nil
}

// set puts spec's limits in force and reads them back.
func (u *userCgroup) set(spec sandbox.Spec) error {
	cgroupSetMu.Lock() // opencontainers/cgroups v0.1.0 fills a global cache unlocked on first Set
	err := u.mgr.Set(resources(spec, u.v2))
	cgroupSetMu.Unlock()
	if err != nil {
		return fmt.Errorf("%w: set cgroup limits: %v", sandbox.ErrUnsupported, err)
	}
	return u.verify(spec)
}

// memoryHeld is what the computer's processes hold that reclaim cannot
// take back (anonymous memory and tmpfs; page cache is not counted).
func (u *userCgroup) memoryHeld() (int64, error) {
	file, keys := filepath.Join(u.paths["memory"], "memory.stat"), []string{"total_rss", "total_shmem"}
	if u.v2 {
		file, keys = filepath.Join(u.paths[""], "memory.stat"), []string{"anon", "shmem"}
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	var held int64
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if n, err := strconv.ParseInt(v, 10, 64); ok && err == nil && slices.Contains(keys, k) {
			held += n
		}
	}
	return held, nil
}

// verify reads the limits back: a controller that silently ignored a write
// must stop the computer from starting.
func (u *userCgroup) verify(spec sandbox.Spec) error {
	check := func(dir, file, want string) error {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			return fmt.Errorf("%w: cannot read %s: %v", sandbox.ErrUnsupported, file, err)
		}
		if got := strings.TrimSpace(string(b)); got != want {
			return fmt.Errorf("%w: %s is %q, want %q", sandbox.ErrUnsupported, file, got, want)
		}
		return nil
	}
	mem := fmt.Sprint(spec.MemoryBytes)
	pids := fmt.Sprint(spec.Pids)
	if u.v2 {
		d := u.paths[""]
		if err := check(d, "memory.max", mem); err != nil {
			return err
		}
		return check(d, "pids.max", pids)
	}
	if err := check(u.paths["memory"], "memory.limit_in_bytes", pageRound(spec.MemoryBytes)); err != nil {
		return err
	}
	return check(u.paths["pids"], "pids.max", pids)
}

// pageRound mirrors the kernel rounding memory limits down to whole pages.
func pageRound(n int64) string {
	page := int64(os.Getpagesize())
	return fmt.Sprint(n / page * page)
}

// delegateV2 enables the controllers computers need from the process's own
// cgroup down to parent. It refuses with a precise message when they are not
// delegated to us.
func delegateV2(parent string) error {
	own, err := ownV2Path()
	if err != nil {
		return err
	}
	avail, err := os.ReadFile(filepath.Join(own, "cgroup.controllers"))
	if err != nil {
		return fmt.Errorf("%w: read %s/cgroup.controllers: %v", sandbox.ErrUnsupported, own, err)
	}
	have := strings.Fields(string(avail))
	for _, c := range v2Controllers {
		if !contains(have, c) {
			return fmt.Errorf("%w: cgroup v2 controller %q is not delegated to %s (available: %v); run cubicle in a cgroup with Delegate=yes, e.g. systemd-run --scope -p Delegate=yes cubicle ...",
				sandbox.ErrUnsupported, c, own, have)
		}
	}
	enable := "+" + strings.Join(v2Controllers, " +")
	dir := own
	for _, part := range strings.Split(strings.TrimPrefix(parent, own+"/"), "/") {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(enable), 0); err != nil {
			if errors.Is(err, unix.EBUSY) {
				return fmt.Errorf("%w: cannot enable controllers below %s because it holds processes (cgroup v2 forbids it); start cubicle in its own delegated cgroup, e.g. systemd-run --scope -p Delegate=yes cubicle ...",
					sandbox.ErrUnsupported, dir)
			}
			return fmt.Errorf("%w: enable controllers in %s: %v", sandbox.ErrUnsupported, dir, err)
		}
		dir = filepath.Join(dir, part)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%w: create cgroup %s: %v", sandbox.ErrUnsupported, dir, err)
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// agentFDs opens the directories and files the agent needs to place and
// track processes, as descriptors it inherits (it has no /sys inside).
// The returned files must be closed by the caller after the agent started.
func (u *userCgroup) agentFDs(firstFD int) ([]*os.File, protocol.CgroupFDs, error) {
	var files []*os.File
	var cfg protocol.CgroupFDs
	openDir := func(p string) (int, error) {
		f, err := os.OpenFile(p, os.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			return 0, err
		}
		files = append(files, f)
		return firstFD + len(files) - 1, nil
	}
	fail := func(err error) ([]*os.File, protocol.CgroupFDs, error) {
		for _, f := range files {
			f.Close()
		}
		return nil, protocol.CgroupFDs{}, fmt.Errorf("%w: open cgroup for the agent: %v", sandbox.ErrUnsupported, err)
	}
	track, oom := "pids", filepath.Join(u.paths["memory"], "memory.oom_control")
	if u.v2 {
		track, oom = "", filepath.Join(u.paths[""], "memory.events")
	}
	for _, c := range sortedKeys(u.paths) {
		fd, err := openDir(u.paths[c])
		if err != nil {
			return fail(err)
		}
		cfg.Place = append(cfg.Place, fd)
		if c == track {
			cfg.Track = fd
		}
	}
	cfg.TrackPlaces = true
	f, err := os.Open(oom)
	if err != nil {
		return fail(err)
	}
	files = append(files, f)
	cfg.OOM = firstFD + len(files) - 1
	if u.v2 {
		_, err := os.Stat(filepath.Join(u.paths[""], "cgroup.kill"))
		cfg.Kill = err == nil
	}
	return files, cfg, nil
}

// lift removes the CPU quota so teardown is not throttled.
func (u *userCgroup) lift() {
	if u.v2 {
		os.WriteFile(filepath.Join(u.paths[""], "cpu.max"), []byte("max"), 0)
		return
	}
	os.WriteFile(filepath.Join(u.paths["cpu"], "cpu.cfs_quota_us"), []byte("-1"), 0)
}

// kill kills every process in the user cgroup (cgroup.kill on v2).
func (u *userCgroup) kill() {
	if u.v2 {
		if os.WriteFile(filepath.Join(u.paths[""], "cgroup.kill"), []byte("1"), 0) == nil {
			return
		}
	}
	if pids, err := u.mgr.GetAllPids(); err == nil {
		for _, pid := range pids {
			unix.Kill(pid, unix.SIGKILL)
		}
	}
}

// destroy removes the user cgroup, its per-process leaves and the
// per-computer directory above it.
func (u *userCgroup) destroy() error {
	var parents []string
	for _, p := range u.paths {
		parents = append(parents, filepath.Dir(p))
	}
	// RemovePaths forgets the paths it removed, so the parents were taken first.
	err := cgroups.RemovePaths(u.paths)
	for _, p := range parents {
		if rerr := cgroups.RemovePath(p); rerr != nil && err == nil {
			err = rerr
		}
	}
	return err
}
