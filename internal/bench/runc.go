package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// runcEnv is runc's side of the bench: one rootfs, two bundles (one
// running /bin/echo, one running sleep for exec), and runc's state under
// a private --root, all inside one temp dir. Every container it starts is
// tracked until it is deleted.
type runcEnv struct {
	cfg  Config
	bin  string
	dir  string
	root string // runc --root
	pr   *proc

	prepared bool
	prepErr  error
	seq      int
	live     map[string]bool // containers that may still exist
	execID   string
}

func newRunc(cfg Config) (*runcEnv, error) {
	bin, err := lookPeer("runc")
	if err != nil {
		return nil, err
	}
	return &runcEnv{cfg: cfg, bin: bin, live: make(map[string]bool)}, nil
}

func (e *runcEnv) bundle(name string) string { return filepath.Join(e.dir, name) }

// prepare builds the rootfs and bundles once, for both runc paths.
func (e *runcEnv) prepare(ctx context.Context) error {
	if !e.prepared {
		e.prepared = true
		e.prepErr = e.build(ctx)
	}
	return e.prepErr
}

func (e *runcEnv) build(ctx context.Context) error {
	dir, err := os.MkdirTemp(e.cfg.TempDir, "cubicle-bench-runc-")
	if err != nil {
		return err
	}
	e.dir = dir
	e.root = filepath.Join(e.dir, "state")
	rootfs := filepath.Join(e.dir, "rootfs")
	for _, d := range []string{e.root, e.bundle("spec"), e.bundle("run"), e.bundle("exec")} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return err
		}
	}
	// The container's / (uid 1000 must be able to traverse it).
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		return err
	}
	if err := os.Chmod(rootfs, 0o755); err != nil { // whatever the umask
		return err
	}
	if e.pr, err = newProc(e.dir, "runc", e.cfg.Timeout, false); err != nil {
		return err
	}
	// The rootfs is empty directories and symlinks; runc mounts /usr (and
	// the runtime dirs of a host without merged /usr) inside the
	// container's mount namespace only, so nothing here is ever a host
	// mount point.
	dirs := runtimeDirs()
	for _, d := range dirs {
		p := filepath.Join(rootfs, d.name)
		if d.target != "" {
			err = os.Symlink(d.target, p)
		} else {
			err = os.Mkdir(p, 0o755)
		}
		if err != nil {
			return err
		}
	}
	for _, d := range []string{"usr", "proc", "dev", "tmp", "workspace"} {
		if err := os.Mkdir(filepath.Join(rootfs, d), 0o755); err != nil {
			return err
		}
	}
	if err := e.pr.run(ctx, e.bin, "spec", "--bundle", e.bundle("spec")); err != nil {
		return err
	}
	raw, err := os.ReadFile(filepath.Join(e.bundle("spec"), "config.json"))
	if err != nil {
		return err
	}
	for name, args := range map[string][]string{"run": echoArgv, "exec": {"/bin/sleep", "infinity"}} {
		cfg, err := editSpec(raw, rootfs, args, e.cfg.Spec, dirs)
		if err != nil {
			return fmt.Errorf("edit runc spec: %w", err)
		}
		if err := os.WriteFile(filepath.Join(e.bundle(name), "config.json"), cfg, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// editSpec turns runc's default spec into a container like a computer:
// args as uid/gid 1000 in /workspace, no terminal, read-only root with
// /usr bound read-only, tmpfs /tmp and /workspace, no /sys, new pid, mount,
// network (loopback only), ipc and uts namespaces, and the computer's
// memory, pids and CPU limits.
func editSpec(raw []byte, rootfs string, args []string, spec sandbox.Spec, dirs []topDir) ([]byte, error) {
	var c map[string]any
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	process, ok1 := c["process"].(map[string]any)
	linux, ok2 := c["linux"].(map[string]any)
	mounts, ok3 := c["mounts"].([]any)
	if !ok1 || !ok2 || !ok3 {
		return nil, errors.New("runc spec lacks process, linux or mounts")
	}
	process["args"] = args
	process["terminal"] = false
	process["user"] = map[string]any{"uid": 1000, "gid": 1000}
	process["cwd"] = "/workspace"
	c["root"] = map[string]any{"path": rootfs, "readonly": true}
	c["hostname"] = "computer"

	kept := []any{}
	for _, m := range mounts {
		if mm, ok := m.(map[string]any); ok && mm["destination"] == "/sys" {
			continue // a computer has no /sys
		}
		kept = append(kept, m)
	}
	bind := func(p string) map[string]any {
		return map[string]any{"destination": p, "type": "bind", "source": p,
			"options": []string{"rbind", "ro", "nosuid", "nodev"}}
	}
	kept = append(kept, bind("/usr"))
	for _, d := range dirs {
		if d.target == "" {
			kept = append(kept, bind("/"+d.name))
		}
	}
	kept = append(kept,
		map[string]any{"destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
			"options": []string{"nosuid", "nodev", "mode=1777", fmt.Sprintf("size=%d", max(spec.MemoryBytes/4, 1<<20))}},
		map[string]any{"destination": "/workspace", "type": "tmpfs", "source": "tmpfs",
			"options": []string{"nosuid", "nodev", "mode=755", "uid=1000", "gid=1000"}},
	)
	c["mounts"] = kept

	var ns []any
	for _, t := range []string{"pid", "mount", "network", "ipc", "uts"} {
		ns = append(ns, map[string]any{"type": t})
	}
	linux["namespaces"] = ns
	res, _ := linux["resources"].(map[string]any)
	if res == nil {
		res = map[string]any{}
	}
	mem := map[string]any{"limit": spec.MemoryBytes}
	if swapAccounting() {
		mem["swap"] = spec.MemoryBytes // memory+swap: no swap beyond the limit, as a computer
	}
	res["memory"] = mem
	res["pids"] = map[string]any{"limit": spec.Pids}
	if spec.CPUs > 0 {
		res["cpu"] = map[string]any{"quota": int64(spec.CPUs * 100000), "period": 100000}
	}
	linux["resources"] = res
	return json.MarshalIndent(c, "", "\t")
}

// swapAccounting reports whether runc can be given a memory+swap limit.
func swapAccounting() bool {
	if cgroupMode() == "v2" {
		return true
	}
	_, err := os.Stat("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes")
	return err == nil
}

// idPrefix starts the id of every container this process makes.
func (e *runcEnv) idPrefix() string { return fmt.Sprintf("cubicle-bench-%d-", os.Getpid()) }

func (e *runcEnv) runc(args ...string) []string {
	return append([]string{e.bin, "--root", e.root}, args...)
}

// runPath measures 'runc run' of /bin/echo, one new container each time.
func (e *runcEnv) runPath() *path {
	return &path{
		name:  "runc run",
		rows:  []rowDef{{RowRuncRun, "runc     run → first byte"}},
		setup: e.prepare,
		sample: func(ctx context.Context) (map[string]time.Duration, error) {
			e.seq++
			id := fmt.Sprintf("%s%d", e.idPrefix(), e.seq)
			e.live[id] = true
			d, err := e.pr.firstByte(ctx, e.runc("run", "--bundle", e.bundle("run"), id), echoOutput)
			// 'runc run' deletes its container when the process exits;
			// make sure, outside the timing.
			if derr := e.delete(id); err == nil {
				err = derr
			}
			return map[string]time.Duration{RowRuncRun: d}, err
		},
	}
}

// execPath measures 'runc exec' into one running container.
func (e *runcEnv) execPath() *path {
	return &path{
		name: "runc exec",
		rows: []rowDef{
			{RowRuncExecTru, "runc     exec /bin/true round trip"},
			{RowRuncExecEch, "runc     exec /bin/echo → first byte"},
		},
		setup: func(ctx context.Context) error {
			if err := e.prepare(ctx); err != nil {
				return err
			}
			e.execID = e.idPrefix() + "exec"
			e.live[e.execID] = true
			// Detached with stdio from /dev/null (os/exec's default for nil
			// stdin and stdout); stderr is a plain file.
			return e.pr.run(ctx, e.runc("run", "--detach", "--bundle", e.bundle("exec"), e.execID)...)
		},
		sample: func(ctx context.Context) (map[string]time.Duration, error) {
			rt, err := e.pr.roundTrip(ctx, e.runc("exec", e.execID, "/bin/true"))
			if err != nil {
				return nil, err
			}
			fb, err := e.pr.firstByte(ctx, e.runc(append([]string{"exec", e.execID}, echoArgv...)...), echoOutput)
			if err != nil {
				return nil, err
			}
			return map[string]time.Duration{RowRuncExecTru: rt, RowRuncExecEch: fb}, nil
		},
	}
}

// delete removes container id if runc still has state for it, with a
// bounded context of its own (it also runs after Ctrl-C).
func (e *runcEnv) delete(id string) error {
	if _, err := os.Stat(filepath.Join(e.root, id)); errors.Is(err, os.ErrNotExist) {
		delete(e.live, id)
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.pr.run(ctx, e.runc("delete", "--force", id)...); err != nil {
		if _, serr := os.Stat(filepath.Join(e.root, id)); !errors.Is(serr, os.ErrNotExist) {
			return fmt.Errorf("delete container %s: %w", id, err)
		}
	}
	delete(e.live, id)
	return nil
}

// close deletes every container that may remain, then cgroups runc left
// behind (a 'runc run' killed before it wrote its state leaves them), then
// the temp dir.
func (e *runcEnv) close(context.Context) error {
	var errs []error
	ids := make([]string, 0, len(e.live))
	for id := range e.live {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if err := e.delete(id); err != nil {
			errs = append(errs, err)
		}
	}
	if e.pr != nil {
		e.pr.close()
	}
	if e.prepared {
		if err := sweepCgroups(e.idPrefix()); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		// Keep the state dir: without it runc cannot delete them later.
		return fmt.Errorf("%v (runc state kept in %s; delete with: runc --root %s delete --force ID)", errors.Join(errs...), e.root, e.root)
	}
	if e.dir == "" {
		return nil
	}
	return os.RemoveAll(e.dir)
}

// sweepCgroups removes cgroups whose name starts with prefix, killing
// what is still in them. runc puts a container's cgroup at the top of some
// hierarchies and below this process's own cgroup in others, so both places
// are searched in every hierarchy.
func sweepCgroups(prefix string) error {
	parents := map[string]bool{"/": true}
	if b, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.SplitN(line, ":", 3); len(f) == 3 {
				parents[f[2]] = true
			}
		}
	}
	var errs []error
	seen := map[string]bool{}
	for _, m := range cgroupMounts() {
		for parent := range parents {
			dirs, _ := filepath.Glob(filepath.Join(m, parent, prefix+"*"))
			for _, d := range dirs {
				if fi, err := os.Stat(d); err != nil || !fi.IsDir() || seen[d] {
					continue
				}
				seen[d] = true
				if err := removeCgroup(d); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	return errors.Join(errs...)
}

// cgroupMounts lists where cgroup and cgroup2 filesystems are mounted.
func cgroupMounts() []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var mounts []string
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if ok && len(f) >= 5 && len(g) >= 1 && (g[0] == "cgroup" || g[0] == "cgroup2") {
			mounts = append(mounts, f[4])
		}
	}
	return mounts
}

// removeCgroup kills the processes in cgroup dir and removes it, retrying
// while they die.
func removeCgroup(dir string) error {
	var err error
	for range 100 {
		if b, rerr := os.ReadFile(filepath.Join(dir, "cgroup.procs")); rerr == nil {
			for _, f := range strings.Fields(string(b)) {
				if pid, _ := strconv.Atoi(f); pid > 0 {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		if err = os.Remove(dir); err == nil || errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("remove runc's cgroup %s: %w", dir, err)
}
