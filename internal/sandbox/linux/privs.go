package linux

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox/linux/seccomp"
)

// agentCaps are the only capabilities the agent keeps: to start processes
// as the sandbox user (setuid, setgid; also setfsuid for file operations)
// and to signal them (kill). User processes get none: the change of uid on
// exec clears them, and everything else is gone from the bounding set.
var agentCaps = []uintptr{unix.CAP_SETUID, unix.CAP_SETGID, unix.CAP_KILL}

// buildCaps are kept besides agentCaps in a template build's computer,
// whose processes run as root of its user namespace (protocol.Init.Build):
// what a Dockerfile's RUN as root relies on to install files (chown to
// the ids the namespace maps, write and chmod files it does not own).
// They are capabilities of the computer's user namespace: they act only
// on inodes whose owner and group it maps (root and the sandbox user), in
// the computer's own mounts.
var buildCaps = []uintptr{unix.CAP_CHOWN, unix.CAP_DAC_OVERRIDE, unix.CAP_FOWNER}

// keptCaps are the capabilities the agent keeps: agentCaps, and buildCaps
// in a build's computer.
func keptCaps(build bool) []uintptr {
	if build {
		return append(slices.Clone(agentCaps), buildCaps...)
	}
	return agentCaps
}

// dropBoundingSet reduces the calling thread's bounding set to keepCaps.
// It runs on the spawner thread only: user processes are forked from there
// and inherit it; the agent's other threads never exec, and no_new_privs
// keeps any exec from gaining capabilities anyway. (Doing it on every
// thread costs one AllThreadsSyscall per capability, ~4 ms per computer.)
func dropBoundingSet(keepCaps []uintptr) error {
	last, err := lastCap()
	if err != nil {
		return err
	}
	keep := map[uintptr]bool{}
	for _, c := range keepCaps {
		keep[c] = true
	}
	for c := uintptr(0); c <= last; c++ {
		if keep[c] {
			continue
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, c, 0, 0, 0); err != nil {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
		}
	}
	return nil
}

// dropPrivileges applies, to every thread of the agent: no supplementary
// groups, no ambient capabilities, only keepCaps, no_new_privs,
// non-dumpable, and the seccomp filter that every user process inherits
// (the program the host compiled, see launch).
func dropPrivileges(filter []byte, keepCaps []uintptr) error {
	if err := syscall.Setgroups(nil); err != nil {
		return fmt.Errorf("drop groups: %w", err)
	}
	if err := allThreads(unix.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0); err != nil {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	var mask uint32
	for _, c := range keepCaps {
		mask |= 1 << c
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	data := [2]unix.CapUserData{{Effective: mask, Permitted: mask}}
	if err := allThreads(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); err != nil {
		return fmt.Errorf("set capabilities: %w", err)
	}
	if err := allThreads(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0); err != nil {
		return fmt.Errorf("set no_new_privs: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("set non-dumpable: %w", err)
	}
	prog, err := seccomp.Parse(filter)
	if err != nil {
		return err
	}
	if err := prog.Load(); err != nil {
		return fmt.Errorf("load seccomp filter: %w", err)
	}
	return nil
}

// allThreads runs a syscall on every OS thread: capabilities and
// no_new_privs are per-thread attributes, and any thread may later fork a
// user process.
func allThreads(trap, a1, a2, a3 uintptr) error {
	_, _, errno := syscall.AllThreadsSyscall(trap, a1, a2, a3)
	if errno == syscall.ENOTSUP {
		return fmt.Errorf("cubicle was built with cgo; rebuild it with CGO_ENABLED=0")
	}
	if errno != 0 {
		return errno
	}
	return nil
}

func lastCap() (uintptr, error) {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return 0, fmt.Errorf("read cap_last_cap: %w", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("parse cap_last_cap: %w", err)
	}
	return uintptr(n), nil
}
