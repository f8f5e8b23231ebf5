package linux_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/template/templatetest"
)

// Hostile code in real computers: everything here must FAIL inside a
// computer (or, for the controls, work, so a failure is not an accident of a
// broken runtime). The probes live in testdata/probe.py and testdata/syscalls.c.

const python = "/usr/bin/python3" // the system Python; never the pyenv one on PATH

// onEachRoot runs test in a parallel subtest on each kind of root a
// computer can have: the host template's ("host") and a template's image
// ("template", templatetest.ToolsRoot). Every isolation property holds on
// both; root is the Spec tweak that makes a computer of the kind.
func onEachRoot(t *testing.T, test func(t *testing.T, root func(*sandbox.Spec))) {
	roots := []struct {
		name string
		root func(*sandbox.Spec)
	}{{"host", nil}, {"template", toolsTemplate(t)}}
	for _, r := range roots {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			test(t, r.root)
		})
	}
}

// toolsImage is the image of a templatetest.ToolsRoot in toolsDir, made
// once for the test binary by the first test that needs it (TestMain
// removes it).
var (
	toolsOnce  sync.Once
	toolsDir   string
	toolsImage string
)

// toolsTemplate is the Spec tweak of a computer made from toolsImage.
func toolsTemplate(t *testing.T) func(*sandbox.Spec) {
	t.Helper()
	toolsOnce.Do(func() {
		dir, err := os.MkdirTemp("", "cubicle-tools-template-")
		if err != nil {
			t.Fatal(err)
		}
		toolsDir = dir
		toolsImage = templatetest.Image(t, templatetest.ToolsRoot(t, dir))
	})
	if toolsImage == "" {
		t.Fatal("the tools template could not be made (see the first test that tried)")
	}
	return func(s *sandbox.Spec) { s.Root = sandbox.Root{Template: "tools", Image: toolsImage, Python: python} }
}

// probeScript is testdata/probe.py, read once.
var probeScript = sync.OnceValues(func() ([]byte, error) { return os.ReadFile("testdata/probe.py") })

// upload writes data to path inside sb's workspace.
func upload(t testing.TB, sb sandbox.Sandbox, path string, data []byte, mode uint32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := sb.WriteFile(ctx, sandbox.FileWrite{Path: path, Mode: mode}, bytes.NewReader(data)); err != nil {
		t.Fatalf("upload %s: %v", path, err)
	}
}

// uploadProbe puts probe.py into sb's workspace and returns its path.
func uploadProbe(t testing.TB, sb sandbox.Sandbox) string {
	t.Helper()
	src, err := probeScript()
	if err != nil {
		t.Fatal(err)
	}
	upload(t, sb, "/workspace/.probe.py", src, 0o644)
	return "/workspace/.probe.py"
}

// probe runs the named probes of probe.py in sb, as the user, and returns
// each probe's outcome ("ok", "ok:<detail>", an errno name...).
func probe(t testing.TB, sb sandbox.Sandbox, names ...string) map[string]string {
	t.Helper()
	script := uploadProbe(t, sb)
	r := runReq(t, sb, sandbox.ExecRequest{Argv: append([]string{python, script}, names...)}, nil)
	out := map[string]string{}
	if r.ExitCode != 0 || json.Unmarshal([]byte(r.Stdout), &out) != nil {
		t.Fatalf("probe.py %v: exit %d signal %d\nstdout: %s\nstderr: %s", names, r.ExitCode, r.Signal, r.Stdout, r.Stderr)
	}
	for _, n := range names {
		if _, ok := out[n]; !ok {
			t.Fatalf("probe %s: no outcome in %s", n, r.Stdout)
		}
	}
	return out
}

// expectProbes runs every probe of want in one process and checks each
// outcome in its own subtest.
func expectProbes(t *testing.T, sb sandbox.Sandbox, want map[string]string) {
	t.Helper()
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	got := probe(t, sb, names...)
	for _, n := range names {
		t.Run(n, func(t *testing.T) {
			if got[n] != want[n] {
				t.Errorf("%s = %q, want %q", n, got[n], want[n])
			}
		})
	}
}

// syncBuffer is an output sink safe to read while a process writes to it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// background is a process running in a computer while the test goes on.
type background struct {
	stdout, stderr syncBuffer
	started        chan struct{}
	done           chan struct{}
	cancel         context.CancelFunc
	status         sandbox.ExitStatus
	err            error
}

// startBackground starts req in sb and returns once the process runs. It is
// killed (by cancelling its context) when the test ends, if still running.
func startBackground(t testing.TB, sb sandbox.Sandbox, req sandbox.ExecRequest) *background {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	bg := &background{started: make(chan struct{}), done: make(chan struct{}), cancel: cancel}
	var once sync.Once
	sio := sandbox.ExecIO{Stdout: &bg.stdout, Stderr: &bg.stderr,
		Started: func(int) { once.Do(func() { close(bg.started) }) }}
	go func() {
		defer close(bg.done)
		bg.status, bg.err = sb.Exec(ctx, req, sio)
	}()
	t.Cleanup(func() { bg.stop() })
	select {
	case <-bg.started:
	case <-bg.done:
		t.Fatalf("background %v %q did not start: %v", req.Argv, req.Command, bg.err)
	case <-time.After(30 * time.Second):
		t.Fatalf("background %v %q did not start within 30s", req.Argv, req.Command)
	}
	return bg
}

// wait waits for the process to end by itself.
func (bg *background) wait(t testing.TB, timeout time.Duration) (sandbox.ExitStatus, error) {
	t.Helper()
	select {
	case <-bg.done:
		return bg.status, bg.err
	case <-time.After(timeout):
		t.Fatalf("background process still running after %v", timeout)
		return sandbox.ExitStatus{}, nil
	}
}

// stop kills the process and waits for Exec to return.
func (bg *background) stop() {
	bg.cancel()
	<-bg.done
}

// waitOutput waits until the process printed want.
func (bg *background) waitOutput(t testing.TB, want string, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if out := bg.stdout.String(); strings.Contains(out, want) {
			return out
		}
		select {
		case <-bg.done:
			t.Fatalf("process ended (%+v, %v) before printing %q; stdout %q stderr %q",
				bg.status, bg.err, want, bg.stdout.String(), bg.stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatalf("no %q within %v; stdout %q stderr %q", want, timeout, bg.stdout.String(), bg.stderr.String())
	return ""
}

// processNames lists the command names of the processes visible in sb,
// leaving out the probing command itself.
func processNames(t testing.TB, sb sandbox.Sandbox) []string {
	t.Helper()
	// One process, no fork: it works even when the pids limit is exhausted.
	code := "import os\nme=os.getpid()\nfor p in os.listdir('/proc'):\n" +
		" if p.isdigit() and int(p)!=me:\n  try: print(open('/proc/'+p+'/comm').read().strip())\n  except OSError: pass\n"
	// Its own timeout: the computer's default may be tiny in timeout tests,
	// and python's start is slow on a loaded machine.
	r := runReq(t, sb, sandbox.ExecRequest{Argv: []string{python, "-c", code}, Timeout: time.Minute}, nil)
	if r.ExitCode != 0 {
		t.Fatalf("list processes: exit %d signal %d: %s", r.ExitCode, r.Signal, r.Stderr)
	}
	return strings.Fields(r.Stdout)
}

// waitNoProcesses waits until sb runs no process but the probe, and fails
// listing the survivors otherwise.
func waitNoProcesses(t testing.TB, sb sandbox.Sandbox, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		left := processNames(t, sb)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes still running %v later: %v", within, left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func randomToken(t testing.TB) string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "secret-" + hex.EncodeToString(b[:])
}

func TestIsolationNetwork(t *testing.T) {
	t.Parallel()
	onEachRoot(t, func(t *testing.T, root func(*sandbox.Spec)) {
		sb := newComputer(t, newDriver(t), root)
		t.Run("probes", func(t *testing.T) {
			expectProbes(t, sb, map[string]string{
				// /sys is absent, so these are the kernel's views of the netns.
				"interfaces":   "ok:lo",
				"proc_net_dev": "ok:lo",
				// Control: sockets work, so the failures below are isolation.
				"loopback": "ok:ping",
				// No route anywhere: not to the VM's gateway, not to the internet.
				"tcp_gateway":   "ENETUNREACH",
				"tcp_internet":  "ENETUNREACH",
				"udp_dns":       "ENETUNREACH",
				"tcp6_internet": "ENETUNREACH",
				"dns":           "gaierror",
				// A netns does not isolate vsock: the seccomp filter must refuse it.
				"vsock":       "EPERM",
				"vsock_dgram": "EPERM",
				"alg":         "EPERM",
				"packet_raw":  "EPERM",
				"inet_raw":    "EPERM",
				// No unix socket at all in the computer's netns.
				"unix_sockets": "ok:0",
			})
		})
		t.Run("getent", func(t *testing.T) {
			r := run(t, sb, "getent hosts example.com")
			if r.ExitCode != 2 || r.Stdout != "" {
				t.Errorf("getent hosts example.com: exit %d stdout %q, want exit 2 (not found) and no address", r.ExitCode, r.Stdout)
			}
			// Control: local names resolve.
			if out := mustSucceed(t, sb, "getent hosts localhost"); !strings.Contains(out, "127.0.0.1") && !strings.Contains(out, "::1") {
				t.Errorf("getent hosts localhost = %q", out)
			}
		})
	})
}

func TestIsolationProcesses(t *testing.T) {
	t.Parallel()
	onEachRoot(t, func(t *testing.T, root func(*sandbox.Spec)) {
		sb := newComputer(t, newDriver(t), root)
		got := probe(t, sb, "visible_processes", "stat_pid1", "list_pid1_fds", "read_pid1_environ", "kill0_pid1")
		t.Run("only its own process", func(t *testing.T) {
			// Run directly (no shell), the probe is the only user process; the
			// agent (PID 1) is hidden by hidepid=invisible.
			procs := strings.Split(strings.TrimPrefix(got["visible_processes"], "ok:"), " | ")
			if len(procs) != 1 || !strings.Contains(procs[0], "(self) uid=1000 ") {
				t.Errorf("visible processes: %q, want only the probe itself", got["visible_processes"])
			}
		})
		t.Run("agent hidden", func(t *testing.T) {
			for _, n := range []string{"stat_pid1", "list_pid1_fds", "read_pid1_environ"} {
				if got[n] != "ENOENT" {
					t.Errorf("%s = %q, want ENOENT (hidepid=invisible)", n, got[n])
				}
			}
			// PID 1 exists in the namespace but cannot be signalled.
			if got["kill0_pid1"] != "EPERM" {
				t.Errorf("kill(1, 0) = %q, want EPERM", got["kill0_pid1"])
			}
			r := run(t, sb, "kill -0 1")
			if r.ExitCode == 0 || !strings.Contains(r.Stderr, "Operation not permitted") {
				t.Errorf("kill -0 1: exit %d stderr %q, want EPERM", r.ExitCode, r.Stderr)
			}
		})
		t.Run("host processes invisible", func(t *testing.T) {
			self := os.Getpid()
			exe, _ := os.Executable()
			if r := run(t, sb, fmt.Sprintf("ls -d /proc/%d", self)); r.ExitCode == 0 {
				t.Errorf("the test process (host pid %d) is visible in the computer: %s", self, r.Stdout)
			}
			out := mustSucceed(t, sb, "cat /proc/[0-9]*/cmdline | tr '\\0' ' '")
			// Neither the test binary nor the agent shows up.
			for _, other := range []string{filepath.Base(exe), "cubicle agent", "cubicle launcher"} {
				if strings.Contains(out, other) {
					t.Errorf("process %q visible in the computer: %q", other, out)
				}
			}
		})
	})
}

func TestIsolationBetweenComputers(t *testing.T) {
	t.Parallel()
	onEachRoot(t, func(t *testing.T, root func(*sandbox.Spec)) {
		d := newDriver(t)
		a := newComputer(t, d, root)
		b := newComputer(t, d, root)

		t.Run("workspace", func(t *testing.T) {
			secret := randomToken(t)
			mustSucceed(t, a, "echo "+secret+" > /workspace/secret.txt; cp /workspace/secret.txt /tmp/; cp /workspace/secret.txt /dev/shm/")
			// Control: the search finds it where it is.
			if r := run(t, a, "grep -rl "+secret+" /workspace /tmp /dev/shm"); r.ExitCode != 0 {
				t.Fatalf("control: grep in A: exit %d %s", r.ExitCode, r.Stderr)
			}
			if out := mustSucceed(t, b, "ls -a /workspace /tmp /dev/shm"); strings.Contains(out, "secret") {
				t.Errorf("B sees A's files: %s", out)
			}
			// grep exits 2 for the unreadable files of /etc; what matters is
			// that it lists no file.
			if r := run(t, b, "grep -rl "+secret+" /workspace /tmp /dev/shm /etc /proc/mounts"); r.Stdout != "" || r.ExitCode == 0 {
				t.Errorf("B found A's secret (grep exit %d): %s", r.ExitCode, r.Stdout)
			}
			if _, err := b.Stat(context.Background(), "/workspace/secret.txt"); !errors.Is(err, sandbox.ErrNotFound) {
				t.Errorf("B's file API stat of secret.txt: %v, want ErrNotFound", err)
			}
		})

		t.Run("no block devices", func(t *testing.T) {
			got := probe(t, b, "loop_devices", "mknod_char")
			if got["loop_devices"] != "ok:0" {
				t.Errorf("loop devices in /dev: %s", got["loop_devices"])
			}
			if got["mknod_char"] != "EPERM" {
				t.Errorf("mknod = %s, want EPERM", got["mknod_char"])
			}
			r := run(t, b, "cat /dev/loop0 /dev/loop1 /dev/vda 2>&1 | head -c 100; ls /dev")
			if strings.Contains(r.Stdout, "loop0\n") || strings.Contains(r.Stdout, "vda\n") {
				t.Errorf("block devices in /dev: %s", r.Stdout)
			}
		})

		t.Run("processes", func(t *testing.T) {
			mustSucceed(t, a, "sleep 4242 & exit 0") // background: outlives its command
			comms := func(sb sandbox.Sandbox) string {
				return mustSucceed(t, sb, "cat /proc/[0-9]*/cmdline | tr '\\0' ' '")
			}
			if out := comms(a); !strings.Contains(out, "sleep 4242") {
				t.Fatalf("control: A does not see its own sleep: %q", out)
			}
			if out := comms(b); strings.Contains(out, "sleep 4242") {
				t.Errorf("B sees A's process: %q", out)
			}
		})

		t.Run("sysv ipc", func(t *testing.T) {
			if got := probe(t, a, "shm_create", "shm_find"); got["shm_create"] != "ok" || got["shm_find"] != "ok" {
				t.Fatalf("control: shared memory in A: %v", got)
			}
			if got := probe(t, b, "shm_find")["shm_find"]; got != "ENOENT" {
				t.Errorf("B finds A's SysV shared memory segment: %s, want ENOENT", got)
			}
		})

		t.Run("abstract unix socket", func(t *testing.T) {
			script := uploadProbe(t, a)
			startBackground(t, a, sandbox.ExecRequest{Argv: []string{python, script, "abstract_listen"}}).
				waitOutput(t, "listening", 10*time.Second)
			if got := probe(t, a, "abstract_connect")["abstract_connect"]; got != "ok" {
				t.Fatalf("control: connect in A = %s", got)
			}
			if got := probe(t, b, "abstract_connect")["abstract_connect"]; got != "ECONNREFUSED" {
				t.Errorf("B connects to A's abstract socket: %s, want ECONNREFUSED", got)
			}
		})

		// Per-user kernel quotas (inotify instances, POSIX message queue bytes,
		// pending signals, RLIMIT_NPROC) are counted per host uid. All computers
		// run code as the same uid, so one computer must not be able to use up a
		// quota that the others need.
	})
}

func TestIsolationFilesystem(t *testing.T) {
	t.Parallel()
	onEachRoot(t, func(t *testing.T, root func(*sandbox.Spec)) {
		sb := newComputer(t, newDriver(t), root)
		t.Run("writes", func(t *testing.T) {
			expectProbes(t, sb, map[string]string{
				"write_usr":        "EROFS",
				"write_root":       "EROFS",
				"write_etc":        "EROFS",
				"write_etc_passwd": "EROFS",
				"write_dev":        "EACCES",
				"write_proc_sys":   "EROFS",
				"sys_exists":       "ENOENT",
				// Controls: the user's own places are writable.
				"write_workspace": "ok",
				"write_tmp":       "ok",
			})
		})
		t.Run("shell writes", func(t *testing.T) {
			for _, c := range []string{"touch /usr/x", "touch /x", "touch /etc/x", "echo x > /proc/sys/kernel/hostname"} {
				r := run(t, sb, c)
				if r.ExitCode == 0 || !strings.Contains(r.Stderr, "Read-only file system") {
					t.Errorf("%s: exit %d stderr %q, want EROFS", c, r.ExitCode, r.Stderr)
				}
			}
			if out := mustSucceed(t, sb, "ls /"); strings.Contains(out, "\nsys\n") || strings.HasPrefix(out, "sys\n") {
				t.Errorf("/sys exists: %q", out)
			}
		})
		t.Run("proc masked", func(t *testing.T) {
			mountinfo := mustSucceed(t, sb, "cat /proc/self/mountinfo")
			mounted := map[string]string{}
			for _, line := range strings.Split(mountinfo, "\n") {
				if f := strings.Fields(line); len(f) > 5 {
					mounted[f[4]] = f[5]
				}
			}
			// runc's masked paths, where this host has them.
			var present []string
			for _, name := range []string{"kcore", "keys", "latency_stats", "timer_list", "timer_stats",
				"sched_debug", "sysrq-trigger", "kallsyms", "kmsg", "config.gz"} {
				if _, err := os.Lstat("/proc/" + name); err == nil {
					present = append(present, name)
				}
			}
			if len(present) == 0 {
				t.Fatal("the host has none of the sensitive /proc entries; nothing to check")
			}
			for _, name := range present {
				if _, ok := mounted["/proc/"+name]; !ok {
					t.Errorf("/proc/%s is not masked (no mount over it)", name)
				}
				r := run(t, sb, "head -c 4096 /proc/"+name+" | wc -c")
				if n := strings.TrimSpace(r.Stdout); n != "0" {
					t.Errorf("/proc/%s: read %s bytes, want none", name, n)
				}
			}
			for _, dir := range []string{"sys", "bus", "fs", "irq"} {
				if opts, ok := mounted["/proc/"+dir]; ok && !strings.HasPrefix(opts, "ro,") {
					t.Errorf("/proc/%s is mounted %s, want read-only", dir, opts)
				} else if !ok {
					if _, err := os.Stat("/proc/" + dir); err == nil {
						t.Errorf("/proc/%s is not remounted read-only", dir)
					}
				}
			}
			// kallsyms is readable by anyone when unmasked; here it must be empty.
			if got := probe(t, sb, "read_kallsyms")["read_kallsyms"]; got != "ok:0" {
				t.Errorf("/proc/kallsyms read = %s, want ok:0 (masked)", got)
			}
		})
	})
}

func TestIsolationPrivileges(t *testing.T) {
	t.Parallel()
	onEachRoot(t, func(t *testing.T, root func(*sandbox.Spec)) {
		sb := newComputer(t, newDriver(t), root)
		t.Run("credentials", func(t *testing.T) {
			got := probe(t, sb, "CapInh", "CapPrm", "CapEff", "CapAmb", "CapBnd", "NoNewPrivs", "Seccomp")
			for _, n := range []string{"CapInh", "CapPrm", "CapEff", "CapAmb"} {
				if got[n] != "ok:0000000000000000" {
					t.Errorf("%s = %s, want 0", n, got[n])
				}
			}
			// The bounding set is at most the agent's own (setgid, setuid, kill).
			var bnd uint64
			if _, err := fmt.Sscanf(strings.TrimPrefix(got["CapBnd"], "ok:"), "%x", &bnd); err != nil || bnd&^0xe0 != 0 {
				t.Errorf("CapBnd = %s, want a subset of 0xe0", got["CapBnd"])
			}
			if got["NoNewPrivs"] != "ok:1" {
				t.Errorf("NoNewPrivs = %s, want 1", got["NoNewPrivs"])
			}
			if got["Seccomp"] != "ok:2" {
				t.Errorf("Seccomp = %s, want 2 (filter)", got["Seccomp"])
			}
		})
		t.Run("syscalls", func(t *testing.T) {
			expectProbes(t, sb, map[string]string{
				"setuid0":          "EPERM",
				"setgid0":          "EPERM",
				"setresuid0":       "EPERM",
				"setgroups0":       "EPERM",
				"mount_tmpfs":      "EPERM",
				"remount_root_rw":  "EPERM",
				"umount_proc_keys": "EPERM",
				"chroot":           "EPERM",
				"pivot_root":       "EPERM",
				"unshare_user":     "EPERM",
				"unshare_net":      "EPERM",
				"unshare_mnt":      "EPERM",
				"setns_net":        "EPERM",
				"ptrace_pid1":      "EPERM",
				"bpf":              "EPERM",
				// io_uring could create sockets (IORING_OP_SOCKET) past the
				// seccomp rule on socket's family.
				"io_uring_setup":    "EPERM",
				"mknod_char":        "EPERM",
				"init_module":       "EPERM",
				"finit_module":      "EPERM",
				"kexec_load":        "EPERM",
				"reboot":            "EPERM",
				"swapon":            "EPERM",
				"keyctl":            "EPERM",
				"add_key":           "EPERM",
				"perf_event_open":   "EPERM",
				"open_by_handle_at": "EPERM",
				"sethostname":       "EPERM",
				"iopl":              "EPERM",
				"fsopen":            "EPERM",
			})
		})
		t.Run("tools", func(t *testing.T) {
			for _, c := range []string{
				"mkdir -p /tmp/m && mount -t tmpfs x /tmp/m",
				"unshare -U true",
				"unshare -r id",
				"mknod /tmp/x c 1 3",
				"su -c 'id -u' root </dev/null",
				"hostname pwned",
			} {
				r := run(t, sb, c)
				if r.ExitCode == 0 || strings.TrimSpace(r.Stdout) == "0" {
					t.Errorf("%s: exit %d stdout %q stderr %q, want failure", c, r.ExitCode, r.Stdout, r.Stderr)
				}
			}
			if out := mustSucceed(t, sb, "id -u; id -G; hostname"); out != "1000\n1000\ncomputer\n" {
				t.Errorf("identity after the attempts: %q", out)
			}
		})
	})
}

func TestIsolationAgent(t *testing.T) {
	t.Parallel()
	onEachRoot(t, func(t *testing.T, root func(*sandbox.Spec)) {
		d := newDriver(t)
		t.Run("cannot kill or trace it", func(t *testing.T) {
			t.Parallel()
			sb := newComputer(t, d, root)
			r := run(t, sb, "kill -9 1")
			if r.ExitCode == 0 || !strings.Contains(r.Stderr, "Operation not permitted") {
				t.Errorf("kill -9 1: exit %d stderr %q, want EPERM", r.ExitCode, r.Stderr)
			}
			expectProbes(t, sb, map[string]string{
				"kill9_pid1":            "EPERM",
				"ptrace_pid1":           "EPERM",
				"process_vm_readv_pid1": "EPERM",
				"pidfd_getfd_pid1":      "EPERM",
				"pidfd_kill_pid1":       "EPERM",
			})
			if out := mustSucceed(t, sb, "echo ok"); out != "ok\n" {
				t.Errorf("after the attacks: %q", out)
			}
		})
		t.Run("kill -1 spares it", func(t *testing.T) {
			t.Parallel()
			sb := newComputer(t, d, root)
			mustSucceed(t, sb, "sleep 1000 & sleep 1001 & exit 0")
			// kill(-1) reaches every process the user may signal but itself.
			if out := mustSucceed(t, sb, "kill -9 -1; echo survived"); out != "survived\n" {
				t.Errorf("kill -9 -1: %q", out)
			}
			waitNoProcesses(t, sb, 5*time.Second)
			if out := mustSucceed(t, sb, "echo ok"); out != "ok\n" {
				t.Errorf("after kill -9 -1: %q", out)
			}
			if _, err := sb.Stat(context.Background(), "/workspace"); err != nil {
				t.Errorf("file API after kill -9 -1: %v", err)
			}
		})
		t.Run("control channel unreachable", func(t *testing.T) {
			t.Parallel()
			sb := newComputer(t, d, root)
			// The user's process holds exactly stdin, stdout and stderr.
			if out := mustSucceed(t, sb, "ls /proc/$$/fd"); out != "0\n1\n2\n" {
				t.Errorf("descriptors of the user's shell: %q, want 0 1 2", out)
			}
			if out := mustSucceed(t, sb, "ls -l /proc/$$/fd | grep -c socket || true"); out != "0\n" {
				t.Errorf("the user's shell holds sockets: %s", out)
			}
			expectProbes(t, sb, map[string]string{
				"list_pid1_fds": "ENOENT",
				"socket_fds":    "ok:0", // no visible process holds a socket
				"socket_files":  "ok:0", // no socket file anywhere (but the host's /usr)
				"unix_sockets":  "ok:0", // and none in the network namespace
			})
		})
	})
}

// buildSyscalls compiles testdata/syscalls.c statically for the host.
func buildSyscalls(t testing.TB) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "syscalls")
	cmd := exec.Command("gcc", "-static", "-O1", "-Wall", "-o", out, "testdata/syscalls.c")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, b)
	}
	bin, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// hostHasI386 runs the syscalls probe's int80 case on the host, outside any
// sandbox: it prints when the kernel has the i386 ABI, and dies of SIGSEGV
// when the kernel was built or booted without IA32 emulation.
func hostHasI386(t *testing.T, bin []byte) bool {
	t.Helper()
	path := filepath.Join(t.TempDir(), "syscalls")
	if err := os.WriteFile(path, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(path, "int80").Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("syscalls int80 on the host: %v, %q (it always fails: by a signal, or exit status 1 after printing)", err, out)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGSEGV {
		return false
	}
	if ee.ExitCode() != 1 || !strings.HasPrefix(string(out), "int80 ") {
		t.Fatalf("syscalls int80 on the host: %v, %q", err, out)
	}
	return true
}

func TestIsolationSeccomp(t *testing.T) {
	t.Parallel()
	onEachRoot(t, func(t *testing.T, root func(*sandbox.Spec)) {
		sb := newComputer(t, newDriver(t), root)
		t.Run("clone3 is ENOSYS", func(t *testing.T) {
			// ENOSYS makes libcs fall back to clone, whose flags the filter checks.
			if got := probe(t, sb, "clone3")["clone3"]; got != "ENOSYS" {
				t.Errorf("clone3 = %s, want ENOSYS", got)
			}
		})
		bin := buildSyscalls(t)
		upload(t, sb, "/workspace/syscalls", bin, 0o755)
		t.Run("native control", func(t *testing.T) {
			r := runReq(t, sb, sandbox.ExecRequest{Argv: []string{"/workspace/syscalls", "native"}}, nil)
			if r.ExitCode != 0 || !strings.HasPrefix(r.Stdout, "native getpid=") {
				t.Fatalf("native: %+v %q %q", r.ExitStatus, r.Stdout, r.Stderr)
			}
		})
		for _, abi := range []string{"int80", "x32"} {
			t.Run(abi+" killed", func(t *testing.T) {
				want := 31 // SIGSYS, from the filter
				if abi == "int80" && !hostHasI386(t, bin) {
					// A kernel without IA32 emulation has no i386 entry at
					// all: int $0x80 faults (SIGSEGV) before any filter runs.
					want = 11
				}
				r := runReq(t, sb, sandbox.ExecRequest{Argv: []string{"/workspace/syscalls", abi}}, nil)
				if r.Signal != want || r.Stdout != "" {
					t.Errorf("%s: %+v stdout %q, want killed by signal %d before printing", abi, r.ExitStatus, r.Stdout, want)
				}
			})
		}
		if out := mustSucceed(t, sb, "echo ok"); out != "ok\n" {
			t.Errorf("after SIGSYS: %q", out)
		}
	})
}
