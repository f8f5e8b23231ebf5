package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ServerConfig says how to start the 'cubicle serve' that the API bench
// measures when no --url is given.
type ServerConfig struct {
	Binary string // the cubicle binary (cubicle-bench --cubicle)
	Data   string // its --data directory; must exist
	// LogFile receives the server's output; default Data + ".log".
	LogFile string
	// PoolSize, MaxConcurrent and MemoryBudget become
	// CUBICLE_COMPUTERS_POOL_SIZE, _MAX_CONCURRENT and _MEMORY_BUDGET.
	PoolSize      int
	MaxConcurrent int
	MemoryBudget  string
	// Env holds more variables for the server ("CUBICLE_GATEWAY_UPSTREAM_URL=…").
	Env []string
	// ReadyTimeout bounds the wait for GET /readyz to answer 200 (the
	// server builds its disk template and runs its isolation probe first).
	ReadyTimeout time.Duration
	// StopTimeout bounds the wait for the server to exit after SIGTERM
	// before it is killed.
	StopTimeout time.Duration
}

// Server is a 'cubicle serve' child process.
type Server struct {
	URL string // http://127.0.0.1:PORT
	Key string // the admin key it was bootstrapped with

	pid  int
	done chan struct{} // closed once the process was reaped
	err  error         // its exit status, valid after done
	cfg  ServerConfig
}

// Default bounds of a started server.
const (
	defaultReadyTimeout = 2 * time.Minute
	defaultStopTimeout  = time.Minute
)

// serverEnv is the child's environment: the caller's, without any
// CUBICLE_ variable (a developer's own overrides must not change what is
// measured), plus the bench's settings.
func serverEnv(environ []string, cfg ServerConfig, key string) []string {
	env := make([]string, 0, len(environ)+8)
	for _, kv := range environ {
		if !strings.HasPrefix(kv, "CUBICLE_") {
			env = append(env, kv)
		}
	}
	env = append(env, cfg.Env...)
	return append(env,
		"CUBICLE_ADMIN_KEY="+key,
		"CUBICLE_COMPUTERS_POOL_SIZE="+strconv.Itoa(cfg.PoolSize),
		"CUBICLE_COMPUTERS_MAX_CONCURRENT="+strconv.Itoa(cfg.MaxConcurrent),
		"CUBICLE_COMPUTERS_MEMORY_BUDGET="+cfg.MemoryBudget,
		"CUBICLE_LOG_FORMAT=text", // the listen address is read from its log
		"CUBICLE_LOG_LEVEL=info",
	)
}

// StartServer starts 'cubicle serve' on 127.0.0.1 with a port the kernel
// picks and waits until it is ready. The server runs in its own process
// group (a Ctrl-C in the terminal reaches only the bench, which then
// cleans up in order) and gets SIGTERM should the bench die first. On
// error nothing is left running.
func StartServer(ctx context.Context, cfg ServerConfig) (*Server, error) {
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = defaultReadyTimeout
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = defaultStopTimeout
	}
	if cfg.LogFile == "" {
		cfg.LogFile = strings.TrimRight(cfg.Data, "/") + ".log"
	}
	var b [16]byte
	rand.Read(b[:])
	s := &Server{Key: "cub_bench_" + hex.EncodeToString(b[:]), done: make(chan struct{}), cfg: cfg}
	if err := s.start(); err != nil {
		return nil, err
	}
	if err := s.waitReady(ctx); err != nil {
		s.Stop()
		if tail := s.LogTail(2048); tail != "" {
			err = fmt.Errorf("%w; the server's log ends with:\n%s", err, tail)
		}
		return nil, err
	}
	return s, nil
}

// start runs the server's process; s.done is closed when it exits.
func (s *Server) start() error {
	cfg := s.cfg
	// The log goes to a file, not a pipe: should the bench die, a server
	// writing to a broken pipe would be killed by SIGPIPE before it
	// destroyed its computers.
	logf, err := os.OpenFile(cfg.LogFile, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("server log: %w", err)
	}
	cmd := exec.Command(cfg.Binary, "serve", "--listen", "127.0.0.1:0", "--data", cfg.Data)
	cmd.Env = serverEnv(os.Environ(), cfg, s.Key)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}

	// Pdeathsig fires when the thread that forked the child exits, so the
	// fork happens on a locked thread that lives until the child is reaped.
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return // the thread ends with this goroutine; there is no child
		}
		s.pid = cmd.Process.Pid
		started <- nil
		s.err = cmd.Wait()
		close(s.done)
	}()
	err = <-started
	logf.Close()
	if err != nil {
		return fmt.Errorf("start cubicle serve: %w", err)
	}
	return nil
}

// waitReady waits, within cfg.ReadyTimeout, for the server to log where it
// listens (s.URL) and then to answer GET /readyz.
func (s *Server) waitReady(ctx context.Context) error {
	deadline := time.NewTimer(s.cfg.ReadyTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for s.URL = s.loggedURL(); s.URL == ""; s.URL = s.loggedURL() {
		select {
		case <-tick.C:
		case <-s.done:
			return fmt.Errorf("cubicle serve exited at start: %v", s.err)
		case <-deadline.C:
			return fmt.Errorf("cubicle serve did not log where it listens within %v", s.cfg.ReadyTimeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}

	hc := &http.Client{Timeout: 2 * time.Second}
	defer hc.CloseIdleConnections()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/readyz", nil)
		if resp, err := hc.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-tick.C:
		case <-s.done:
			return fmt.Errorf("cubicle serve exited before it was ready: %v", s.err)
		case <-deadline.C:
			return fmt.Errorf("cubicle serve was not ready (GET /readyz) within %v", s.cfg.ReadyTimeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// loggedURL is the URL the server's log says it listens at, or "".
func (s *Server) loggedURL() string {
	b, err := os.ReadFile(s.cfg.LogFile)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if a := listenAddr(line); a != "" {
			return "http://" + a
		}
	}
	return ""
}

// listenAddr returns the address of the server's "serving" log line
// (slog text: msg=serving listen=127.0.0.1:PORT ...), or "".
func listenAddr(line string) string {
	if !strings.Contains(line, "msg=serving ") {
		return ""
	}
	for _, f := range strings.Fields(line) {
		if a, ok := strings.CutPrefix(f, "listen="); ok {
			return strings.Trim(a, `"`)
		}
	}
	return ""
}

// Stop sends SIGTERM (the server then destroys its computers and the pool),
// waits up to StopTimeout, then kills it. It returns an error when the
// server had to be killed or exited with an error; after a kill, its
// computers are orphans that a GC of its data directory removes. Stop is
// idempotent.
func (s *Server) Stop() error {
	select {
	case <-s.done:
		return s.exitErr()
	default:
	}
	syscall.Kill(s.pid, syscall.SIGTERM)
	t := time.NewTimer(s.cfg.StopTimeout)
	defer t.Stop()
	select {
	case <-s.done:
		return s.exitErr()
	case <-t.C:
	}
	syscall.Kill(s.pid, syscall.SIGKILL)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		return fmt.Errorf("cubicle serve (pid %d) did not exit after SIGKILL", s.pid)
	}
	return fmt.Errorf("cubicle serve did not stop within %v of SIGTERM and was killed", s.cfg.StopTimeout)
}

func (s *Server) exitErr() error {
	var ee *exec.ExitError
	if errors.As(s.err, &ee) {
		return fmt.Errorf("cubicle serve exited: %v", ee)
	}
	return s.err
}

// PID is the server's process id.
func (s *Server) PID() int { return s.pid }

// LogTail returns up to n bytes of the end of the server's log, starting
// at a line.
func (s *Server) LogTail(n int) string {
	b, err := os.ReadFile(s.cfg.LogFile)
	if err != nil {
		return ""
	}
	return tail(string(b), n)
}

// tail returns the last n bytes of s, from a line boundary when it can.
func tail(s string, n int) string {
	if len(s) > n {
		s = s[len(s)-n:]
		if i := strings.IndexByte(s, '\n'); i >= 0 && i+1 < len(s) {
			s = s[i+1:]
		}
	}
	return strings.TrimRight(s, "\n")
}

// RemoveTree removes dir, unless something is still mounted below it (a
// recursive removal must never reach into a mount).
func RemoveTree(dir string) error {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	if mp := mountBelow(string(b), dir); mp != "" {
		return fmt.Errorf("not removing %s: %s is still mounted", dir, mp)
	}
	return os.RemoveAll(dir)
}

// mountBelow returns a mount point of mountinfo at or below dir, or "".
func mountBelow(mountinfo, dir string) string {
	dir = strings.TrimRight(dir, "/")
	for _, line := range strings.Split(mountinfo, "\n") {
		f := strings.Fields(line)
		if len(f) > 4 {
			mp := unescapeOctal(f[4])
			if mp == dir || strings.HasPrefix(mp, dir+"/") {
				return mp
			}
		}
	}
	return ""
}

// unescapeOctal decodes mountinfo's \040-style escapes.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
