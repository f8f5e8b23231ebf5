package agent

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cubicle-sandbox/cubicle/internal/kernel"
)

const (
	// kernelStartTimeout bounds a kernel's start (process, sockets,
	// kernel_info). The call's timeout covers only its cells.
	kernelStartTimeout = 60 * time.Second
	// preludeTimeout bounds a prelude (imports of the scientific stack take
	// about 2 s; a loaded machine is slower).
	preludeTimeout = 120 * time.Second
	// interruptGrace is how long a kernel has to yield after SIGINT before
	// it is killed (a C loop holding the GIL never checks for signals).
	interruptGrace = 2 * time.Second
	// kernelStderrTail is how much of a kernel's own stderr (not its cells'
	// output, which travels over iopub) is kept to explain a failed start.
	kernelStderrTail = 4 << 10
)

// Kernel client bounds. The agent runs outside the computer's memory
// cgroup, so what a kernel can make it allocate is kept well below the
// kernel package's defaults; a PythonOutput must also fit in one control
// frame (MaxPayload), which the image bound leaves room for.
const (
	kernelMaxFrame   = 16 << 20
	kernelMaxImage   = 700 << 10
	defaultMaxOutput = kernel.DefaultMaxOutputBytes // per cell, when the request does not say
	maxOutputLimit   = 16 << 20                     // the most a request may ask for
)

// Reasons the agent kills a kernel on purpose (anything else is a crash).
const (
	killUnresponsive = "did not yield to an interrupt"
	killRestart      = "restarted on request"
	killProtocol     = "broke the wire protocol"
	killStop         = "stopped"
)

// pyKernel is one ipykernel process in the computer and the agent's
// connection to it. Liveness comes from the process (the reaper), never from
// the heartbeat: a kernel stuck in C still answers heartbeats.
type pyKernel struct {
	s      *Server
	proc   *process
	pid    int
	dir    string // 0700 directory of the connection file, owned by the sandbox user
	cwd    string
	client *kernel.Client // set once connected, then read-only

	oomBefore  uint64
	stderr     tailBuffer
	stderrDone chan struct{}

	exited  chan struct{} // closed when the process was reaped
	cleaned chan struct{} // closed when everything it held was released

	mu       sync.Mutex
	status   syscall.WaitStatus // valid once exited is closed
	oom      bool
	killed   string        // why the agent killed it; empty for a death it did not cause
	cellDone chan struct{} // the running cell's end, for the interrupt control
}

func (k *pyKernel) drainStderr(r *os.File) {
	defer close(k.stderrDone)
	buf := make([]byte, 4096)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			k.stderr.Write(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// monitor waits for the kernel process to exit, then releases everything it
// held: what it left running, the client, its cgroup leaf, the pipe and the
// connection file. Every kernel ends here, however it ended.
func (k *pyKernel) monitor(w *waiter, errR *os.File) {
	defer close(k.cleaned)
	defer func() {
		if r := recover(); r != nil {
			k.s.log.Error("python kernel monitor panicked", "panic", r, "stack", string(debug.Stack()))
		}
	}()
	st := <-w.exited
	oom := k.s.oomKills() > k.oomBefore
	k.proc.mu.Lock()
	k.proc.pid = 0 // reaped: the pid may be reused; only the leaf is swept now
	k.proc.mu.Unlock()
	k.s.killTree(k.proc)
	k.mu.Lock()
	k.status, k.oom = st, oom
	close(k.exited)
	c := k.client
	k.mu.Unlock()
	if c != nil {
		c.Close() // a forked child may hold the sockets open: do not wait for EOF
	}
	select {
	case <-k.stderrDone:
	case <-time.After(outputGrace):
	}
	errR.Close()
	<-k.stderrDone
	k.s.releaseLeaf(k.proc.leaf)
	k.s.removeConnDir(k.dir)
}

func (k *pyKernel) dead() bool {
	select {
	case <-k.exited:
		return true
	default:
		return false
	}
}

func (k *pyKernel) waitExit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-k.exited:
		return true
	case <-t.C:
		return false
	}
}

// killedBy says why the agent killed the kernel ("" when it did not).
func (k *pyKernel) killedBy() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.killed
}

// kill kills the kernel and everything it started; the first reason sticks.
func (k *pyKernel) kill(reason string) {
	k.mu.Lock()
	if k.killed == "" {
		k.killed = reason
	}
	k.mu.Unlock()
	if !k.dead() {
		k.s.killTree(k.proc)
	}
}

// stop kills the kernel and waits until all it held is released.
func (k *pyKernel) stop(reason string) {
	k.kill(reason)
	select {
	case <-k.cleaned:
	case <-time.After(10 * time.Second):
		k.s.log.Warn("python kernel not cleaned up 10 s after SIGKILL", "pid", k.pid)
	}
}

// interrupt sends SIGINT to the kernel process (not its group): ipykernel
// turns it into KeyboardInterrupt in the running cell and ignores it when
// idle.
func (k *pyKernel) interrupt() {
	k.mu.Lock()
	defer k.mu.Unlock()
	select {
	case <-k.exited:
	default:
		unix.Kill(k.pid, unix.SIGINT)
	}
}

// death describes how the process ended, e.g. "killed by SIGKILL".
func (k *pyKernel) death() string {
	k.mu.Lock()
	st, oom := k.status, k.oom
	k.mu.Unlock()
	var d string
	switch {
	case st.Exited():
		d = fmt.Sprintf("exit status %d", st.ExitStatus())
	case st.Signaled():
		if name := unix.SignalName(st.Signal()); name != "" {
			d = "killed by " + name
		} else {
			d = fmt.Sprintf("killed by signal %d", int(st.Signal()))
		}
	default:
		d = "ended"
	}
	if oom {
		d += "; the computer ran out of memory"
		if m := k.s.memoryLimit(); m > 0 {
			d += fmt.Sprintf(" (limit %d MiB)", m>>20)
		}
	}
	return d
}

// cellRun is one cell's run in a kernel.
type cellRun struct {
	res         kernel.Result
	err         error // the session ended (protocol error, kernel gone)
	interrupted bool  // ctx ended and the kernel was sent SIGINT
}

// runCell runs code until the kernel finishes it. When ctx ends first, the
// kernel gets SIGINT; if the cell has not ended interruptGrace later (a C
// loop holding the GIL), the kernel is killed. Run itself is never
// abandoned, so every output arrives through onOutput, in order, including
// the KeyboardInterrupt.
func (k *pyKernel) runCell(ctx context.Context, code string, maxOutput int64, onOutput func(kernel.Output)) cellRun {
	done := make(chan struct{})
	k.mu.Lock()
	k.cellDone = done
	k.mu.Unlock()
	var (
		wmu         sync.Mutex
		interrupted bool
	)
	watch := make(chan struct{})
	go func() {
		defer close(watch)
		defer func() {
			if r := recover(); r != nil {
				k.s.log.Error("python watchdog panicked", "panic", r)
				k.kill(killUnresponsive)
			}
		}()
		select {
		case <-done:
			return
		case <-ctx.Done():
		}
		wmu.Lock()
		interrupted = true
		wmu.Unlock()
		k.interrupt()
		t := time.NewTimer(interruptGrace)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			k.kill(killUnresponsive)
		}
	}()
	r, err := k.client.Run(context.Background(), kernel.Request{Code: code, OnOutput: onOutput, MaxOutputBytes: maxOutput})
	close(done)
	<-watch
	k.mu.Lock()
	k.cellDone = nil
	k.mu.Unlock()
	wmu.Lock()
	defer wmu.Unlock()
	return cellRun{res: r, err: err, interrupted: interrupted}
}

// waitCell waits up to d for the running cell (if any) to end.
func (k *pyKernel) waitCell(d time.Duration) {
	k.mu.Lock()
	done := k.cellDone
	k.mu.Unlock()
	if done == nil {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	case <-k.exited:
	}
}

// tailBuffer keeps the last kernelStderrTail bytes written to it.
type tailBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > kernelStderrTail {
		t.b = append(t.b[:0], t.b[len(t.b)-kernelStderrTail:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// lastLine returns ": <the last "Fatal Python error" line of s>", else
// ": <its last non-empty line>", or "".
func lastLine(s string) string {
	lines := bytes.Split(bytes.TrimSpace([]byte(s)), []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		// Python's own fatal error says why; the lines after it do not.
		if l := strings.TrimSpace(string(lines[i])); strings.HasPrefix(l, "Fatal Python error: ") {
			return ": " + clipString(l, 300)
		}
	}
	if l := strings.TrimSpace(string(lines[len(lines)-1])); l != "" {
		return ": " + clipString(l, 300)
	}
	return ""
}

func clipString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xc0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
