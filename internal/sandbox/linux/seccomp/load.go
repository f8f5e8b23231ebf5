//go:build linux

package seccomp

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Load installs the filter on the calling thread with seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, ...).
// The caller must already have set PR_SET_NO_NEW_PRIVS. Returns a wrapped error naming what failed.
//
// TSYNC applies the filter to every thread of the process. PR_SET_NO_NEW_PRIVS
// is per thread, so the caller should hold runtime.LockOSThread across the
// prctl and Load.
func (f *Filter) Load() error {
	if len(f.prog) == 0 || len(f.prog) > unix.BPF_MAXINSNS {
		return fmt.Errorf("seccomp: load: invalid program length %d", len(f.prog))
	}
	// Checked explicitly: with CAP_SYS_ADMIN the kernel would not insist, and
	// an unprivileged-looking filter without NO_NEW_PRIVS lets setuid binaries
	// regain privileges.
	nnp, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	if err != nil {
		return fmt.Errorf("seccomp: load: prctl(PR_GET_NO_NEW_PRIVS): %w", err)
	}
	if nnp != 1 {
		return errors.New("seccomp: load: PR_SET_NO_NEW_PRIVS is not set on the calling thread")
	}

	prog := unix.SockFprog{Len: uint16(len(f.prog)), Filter: &f.prog[0]}
	r, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog)))
	if errno != 0 {
		return fmt.Errorf("seccomp: load: seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC): %w", errno)
	}
	if r != 0 {
		// With TSYNC a positive result is the ID of a thread that could not be
		// synchronized (it has a diverging filter); nothing was installed.
		return fmt.Errorf("seccomp: load: TSYNC failed: thread %d could not be synchronized", r)
	}
	return nil
}
