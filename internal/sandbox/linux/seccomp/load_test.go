//go:build linux && amd64

package seccomp

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

const (
	helperEnv       = "CUBICLE_SECCOMP_HELPER"
	addrNoRandomize = 0x0040000 // personality(2) flag; not in x/sys/unix
)

// runHelper re-executes the test binary as a child running TestHelperProcess
// in the given mode, so the filter never lands on the test process itself.
func runHelper(t *testing.T, mode string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper %q failed: %v\n%s", mode, err, out)
	}
	if !strings.Contains(string(out), "helper ok") {
		t.Fatalf("helper %q did not run its checks:\n%s", mode, out)
	}
}

// TestLoadEnforces loads the default filter in a child and checks the real
// kernel's verdicts.
func TestLoadEnforces(t *testing.T) { runHelper(t, "enforce") }

// TestLoadRequiresNoNewPrivs checks Load refuses to install without NO_NEW_PRIVS
// (as root the kernel itself would accept it).
func TestLoadRequiresNoNewPrivs(t *testing.T) { runHelper(t, "nonnp") }

// TestHelperProcess is the child side of the tests above; it does nothing
// unless started by runHelper.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		return
	}
	var failures []string
	check := func(what string, err error) {
		if err != nil {
			failures = append(failures, fmt.Sprintf("%s: %v", what, err))
		}
	}
	switch mode {
	case "enforce":
		enforce(check)
	case "nonnp":
		nonNNP(check)
	default:
		check("mode", fmt.Errorf("unknown mode %q", mode))
	}
	if len(failures) > 0 {
		fmt.Fprintln(os.Stderr, "helper failures:\n  "+strings.Join(failures, "\n  "))
		os.Exit(1)
	}
	fmt.Println("helper ok")
	os.Exit(0)
}

func wantErrno(want unix.Errno) func(error) error {
	return func(err error) error {
		if !errors.Is(err, want) {
			return fmt.Errorf("got %v, want %v", err, want)
		}
		return nil
	}
}

func enforce(check func(string, error)) {
	f, err := Default()
	if err != nil {
		check("Default", err)
		return
	}
	// NO_NEW_PRIVS is per thread: keep prctl and Load on the same one.
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		check("prctl(PR_SET_NO_NEW_PRIVS)", err)
		return
	}
	if err := f.Load(); err != nil {
		check("Load", err)
		return
	}
	runtime.UnlockOSThread()
	eperm, enosys := wantErrno(unix.EPERM), wantErrno(unix.ENOSYS)

	// Every call below would behave differently (succeed, or fail with another
	// errno) for root without the filter.
	check("unshare(CLONE_NEWUSER)", eperm(unix.Unshare(unix.CLONE_NEWUSER)))
	_, err = unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM, 0)
	check("socket(AF_VSOCK)", eperm(err))
	_, err = unix.Socket(unix.AF_ALG, unix.SOCK_SEQPACKET, 0)
	check("socket(AF_ALG)", eperm(err))
	_, _, errno := unix.Syscall(unix.SYS_CLONE3, 0, 0, 0)
	check("clone3", enosys(errno))
	check("mount", eperm(unix.Mount("none", "/nonexistent-cubicle-mnt", "tmpfs", 0, "")))
	_, err = unix.PrctlRetInt(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) // prctl is allowed
	check("prctl", err)
	_, _, errno = unix.Syscall(unix.SYS_PERSONALITY, addrNoRandomize, 0, 0)
	check("personality(ADDR_NO_RANDOMIZE)", eperm(errno))
	if _, _, errno := unix.Syscall(unix.SYS_PERSONALITY, 0xffffffff, 0, 0); errno != 0 {
		check("personality(query)", errno)
	}

	if pid, _, errno := unix.RawSyscall(unix.SYS_GETPID, 0, 0, 0); errno != 0 || int(pid) != os.Getpid() {
		check("getpid", fmt.Errorf("pid %d errno %v", pid, errno))
	}
	for _, af := range []int{unix.AF_INET, unix.AF_UNIX} {
		fd, err := unix.Socket(af, unix.SOCK_STREAM, 0)
		check(fmt.Sprintf("socket(%d)", af), err)
		if err == nil {
			unix.Close(fd)
		}
	}

	// TSYNC: every thread of the process must be in filter mode (2).
	tasks, err := filepath.Glob("/proc/self/task/*/status")
	check("glob tasks", err)
	for _, p := range tasks {
		b, err := os.ReadFile(p)
		check("read "+p, err)
		if err == nil && !strings.Contains(string(b), "Seccomp:\t2\n") {
			check(p, errors.New("thread is not in seccomp filter mode"))
		}
	}
	if len(tasks) < 2 {
		check("tasks", fmt.Errorf("only %d threads; TSYNC not exercised", len(tasks)))
	}

	// The Go runtime must keep working: new threads come from clone(2).
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread() // forces a fresh thread once this one exits
		close(done)
	}()
	<-done
}

func nonNNP(check func(string, error)) {
	f, err := Default()
	if err != nil {
		check("Default", err)
		return
	}
	runtime.LockOSThread()
	err = f.Load()
	if err == nil || !strings.Contains(err.Error(), "NO_NEW_PRIVS") {
		check("Load without NO_NEW_PRIVS", fmt.Errorf("got %v, want an error naming NO_NEW_PRIVS", err))
	}
	b, err := os.ReadFile("/proc/self/status")
	check("read status", err)
	if !strings.Contains(string(b), "Seccomp:\t0\n") {
		check("status", errors.New("a filter was installed anyway"))
	}
}
