package podtest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox/kube/podagent"
)

// rootScript gives the agent a root of its own: a tmpfs whose entries are
// recursive binds of the host's (so /usr, /etc, /proc of the new PID
// namespace), plus /workspace, a bind of the test's directory. It runs in
// a new mount namespace, as root.
const rootScript = `set -e
R=$1; WS=$2; shift 2
mount --make-rprivate /
mount -t tmpfs -o mode=0755 cubicle-pod-root "$R"
for e in /*; do
  n=${e#/}
  if [ -L "$e" ]; then cp -P "$e" "$R/$n"
  elif [ -d "$e" ] && [ "$n" != workspace ]; then mkdir "$R/$n"; mount --rbind "$e" "$R/$n"
  fi
done
mkdir "$R/workspace"
mount --bind "$WS" "$R/workspace"
cd /
exec chroot "$R" "$@"
`

// Agent is a running pod agent.
type Agent struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{} // closed once it was waited for
}

// Start runs bin (the cubicle binary) as a pod's agent listening on listen
// ("192.0.2.3:7811"), in the network namespace netns (a path such as
// /run/netns/x; "": this host's), with secret's files (podagent.ServerCert,
// ServerKey, ClientCerts) as its TLS directory. It is stopped (every
// process of it killed) at cleanup, or by Stop.
func Start(t testing.TB, bin, netns, listen string, secret map[string][]byte) *Agent {
	t.Helper()
	a, err := Run(t.TempDir(), bin, netns, listen, secret)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		a.Stop()
		if t.Failed() {
			t.Logf("pod agent output:\n%s", a.Output())
		}
	})
	return a
}

// Run is Start in the directory dir (empty, removed by the caller after
// Stop), for a caller that is not a test's goroutine (a kubetest node
// hook).
func Run(dir, bin, netns, listen string, secret map[string][]byte) (*Agent, error) {
	tlsDir := filepath.Join(dir, "tls")
	if err := writeDir(tlsDir, secret); err != nil {
		return nil, err
	}
	return RunArgv(dir, netns, []string{bin, "agent", podagent.Arg, "--listen", listen, "--tls", tlsDir})
}

// writeDir makes dir with files.
func writeDir(dir string, files map[string][]byte) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o400); err != nil {
			return err
		}
	}
	return nil
}

// RunArgv is Run of any command line (a pod's container's, its paths
// this host's): argv runs in the pod's root, as Start describes.
func RunArgv(dir, netns string, argv []string) (*Agent, error) {
	ws, root := filepath.Join(dir, "workspace"), filepath.Join(dir, "root")
	for _, d := range []string{ws, root} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := os.Chown(ws, 1000, 1000); err != nil {
		return nil, err
	}
	args := append([]string{"--kill-child", "--pid", "--fork", "--mount-proc", "sh", "-c", rootScript, "sh", root, ws}, argv...)
	name := "unshare"
	if netns != "" {
		name, args = "nsenter", append([]string{"--net=" + netns, "unshare"}, args...)
	}
	a := &Agent{cmd: exec.Command(name, args...), out: &syncBuffer{}, done: make(chan struct{})}
	a.cmd.Stdout, a.cmd.Stderr = a.out, a.out
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := a.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the pod agent: %w", err)
	}
	go func() { a.cmd.Wait(); close(a.done) }()
	return a, nil
}

// Stop kills the agent and everything it started (its PID namespace) and
// waits for it (at most 10 s).
func (a *Agent) Stop() {
	syscall.Kill(-a.cmd.Process.Pid, syscall.SIGKILL) // unshare's child dies with it (--kill-child)
	a.Exited(10 * time.Second)
}

// Exited reports whether the agent process has ended (waiting at most wait).
func (a *Agent) Exited(wait time.Duration) bool {
	select {
	case <-a.done:
		return true
	case <-time.After(wait):
		return false
	}
}

// Output is what the agent printed so far.
func (a *Agent) Output() string { return a.out.String() }

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b.Len() > 1<<20 {
		return len(p), nil
	}
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
