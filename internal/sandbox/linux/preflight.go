package linux

import (
	"fmt"
	"os"
	"os/exec"

	"github.com/opencontainers/cgroups"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/linux/seccomp"
)

// preflight refuses to run on a host that cannot enforce a computer's
// isolation and limits, naming what is missing and how to get it.
func preflight() error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", sandbox.ErrUnsupported, fmt.Sprintf(format, args...))
	}
	if os.Geteuid() != 0 {
		return fail("cubicle must run as root to create computers (namespaces, cgroups and loop devices need it)")
	}
	for _, ns := range []string{"pid", "mnt", "net", "ipc", "uts", "cgroup"} {
		if _, err := os.Stat("/proc/self/ns/" + ns); err != nil {
			return fail("the kernel lacks %s namespaces (CONFIG_%s_NS)", ns, map[string]string{
				"pid": "PID", "mnt": "MNT", "net": "NET", "ipc": "IPC", "uts": "UTS", "cgroup": "CGROUP"}[ns])
		}
	}
	if cgroups.IsCgroup2UnifiedMode() {
		own, err := ownV2Path()
		if err != nil {
			return err
		}
		b, err := os.ReadFile(own + "/cgroup.controllers")
		if err != nil {
			return fail("cannot read %s/cgroup.controllers: %v", own, err)
		}
		for _, c := range v2Controllers {
			if !contains(fieldsOf(b), c) {
				return fail("cgroup v2 controller %q is not available in %s; delegate memory, pids and cpu (systemd: Delegate=yes)", c, own)
			}
		}
	} else {
		for _, c := range v1Controllers {
			if _, err := cgroups.GetOwnCgroupPath(c); err != nil {
				return fail("cgroup v1 controller %q is not mounted under /sys/fs/cgroup", c)
			}
		}
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		return fail("no /dev/loop-control: load the loop module (modprobe loop); computers' disks are loop-mounted images")
	}
	if _, err := lookMkfs(); err != nil {
		return fail("mkfs.ext4 not found: install e2fsprogs (apt-get install e2fsprogs)")
	}
	if _, err := os.Stat("/bin/sh"); err != nil {
		return fail("no /bin/sh on this host: computers run shell commands with it")
	}
	if _, err := seccomp.Default(); err != nil {
		return fail("seccomp filter: %v", err)
	}
	if _, err := os.Stat("/proc/sys/kernel/seccomp/actions_avail"); err != nil {
		return fail("the kernel lacks seccomp filters (CONFIG_SECCOMP_FILTER)")
	}
	return nil
}

func lookMkfs() (string, error) {
	for _, p := range []string{"/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return exec.LookPath("mkfs.ext4")
}

func fieldsOf(b []byte) []string {
	var out []string
	start := -1
	for i, c := range append(b, ' ') {
		if c == ' ' || c == '\n' || c == '\t' {
			if start >= 0 {
				out = append(out, string(b[start:i]))
				start = -1
			}
		} else if start < 0 {
			start = i
		}
	}
	return out
}
