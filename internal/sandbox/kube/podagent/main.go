package podagent

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cubicle-sandbox/cubicle/internal/agent"
	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
)

// Arg is the flag, after the hidden agent subcommand, of a pod's agent:
// `cubicle agent --pod`.
const Arg = "--pod"

// IsPod reports whether this process is a pod's agent.
func IsPod() bool {
	return len(os.Args) >= 3 && os.Args[1] == "agent" && os.Args[2] == Arg
}

// Bounds of the connections the agent accepts before its control channel.
const (
	handshakeTimeout = 10 * time.Second
	initTimeout      = 30 * time.Second
	maxHandshakes    = 8
)

// Main runs a pod's agent and returns the process's exit code:
// `cubicle agent --pod [--listen :7811] [--tls /run/cubicle/tls]
// [--identity DIR]`, or, as a pod's init container, `cubicle agent --pod
// --keygen DIR [--termination-log /dev/termination-log]` (keygen.go).
func Main() int {
	runtime.LockOSThread() // for life: the spawner's thread (Serve)
	unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	fs := flag.NewFlagSet("cubicle agent --pod", flag.ContinueOnError)
	listen := fs.String("listen", fmt.Sprintf(":%d", Port), "the control channel's TCP address")
	dir := fs.String("tls", DefaultTLSDir, "the directory of the pod's TLS material ("+ServerCert+", "+ServerKey+", "+ClientCerts+")")
	identity := fs.String("identity", "", "the directory of the pod's own "+ServerCert+" and "+ServerKey+" (default: --tls)")
	keygen := fs.String("keygen", "", "make the pod's identity in this directory, write its fingerprint to --termination-log and exit")
	termLog := fs.String("termination-log", DefaultTerminationLog, "where --keygen writes the fingerprint")
	if err := fs.Parse(os.Args[3:]); err != nil {
		return 2
	}
	if *keygen != "" {
		if err := Keygen(*keygen, *termLog); err != nil {
			log.Error("pod agent: keygen", "err", err)
			return 1
		}
		return 0
	}
	cfg, err := LoadTLS(*dir, *identity)
	if err != nil {
		log.Error("pod agent", "err", err)
		return 1
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Error("pod agent: listen", "err", err)
		return 1
	}
	if err := Serve(context.Background(), ln, cfg, log); err != nil {
		log.Warn("pod agent stopped", "err", err)
		return 1
	}
	return 0
}

// LoadTLS reads the pod's TLS directory (the control plane's
// certificates, and the pod's own key pair unless identity names another
// directory) into the agent's TLS config.
func LoadTLS(dir, identity string) (*tls.Config, error) {
	if identity == "" {
		identity = dir
	}
	read := func(dir, name string) ([]byte, error) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("the pod's TLS material: %w", err)
		}
		return b, nil
	}
	var id Identity
	var client []byte
	var err error
	if id.CertPEM, err = read(identity, ServerCert); err != nil {
		return nil, err
	}
	if id.KeyPEM, err = read(identity, ServerKey); err != nil {
		return nil, err
	}
	if client, err = read(dir, ClientCerts); err != nil {
		return nil, err
	}
	return ServerConfig(id, client)
}

// Serve waits for the control plane's one connection on ln, authenticated
// by cfg, and serves it until it ends. ln stays open (every further
// connection is closed at once) until Serve returns. The caller's thread
// must be locked (runtime.LockOSThread): it becomes the spawner's, which
// starts every user process.
func Serve(ctx context.Context, ln net.Listener, cfg *tls.Config, log *slog.Logger) error {
	defer ln.Close()
	control := make(chan *tls.Conn, 1)
	go acceptLoop(ln, cfg, control, log)
	var conn *tls.Conn
	select {
	case conn = <-control:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer conn.Close()
	init, err := readInit(conn)
	if err != nil {
		return err
	}
	ws, err := prepare(&init)
	if err != nil {
		agent.ReportSetupError(conn, err)
		return err
	}
	// This (locked) thread is the spawner's: it starts every user process.
	spawner := agent.NewSpawner()
	srv := agent.NewServer(conn, init, ws, spawner, log)
	served := make(chan struct{})
	var serveErr error
	go func() {
		serveErr = srv.Serve(ctx)
		close(served)
	}()
	spawner.Run(served)
	return serveErr
}

// acceptLoop hands the first connection whose client presents a pinned
// certificate to control; others fail their handshake (at most
// maxHandshakes at a time, each within handshakeTimeout), and once one
// was handed over, every further connection is closed unread.
func acceptLoop(ln net.Listener, cfg *tls.Config, control chan<- *tls.Conn, log *slog.Logger) {
	var claimed atomic.Bool
	slots := make(chan struct{}, maxHandshakes)
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if claimed.Load() {
			c.Close()
			continue
		}
		select {
		case slots <- struct{}{}:
		default:
			c.Close() // too many handshakes in flight
			continue
		}
		go func() {
			defer func() { <-slots }()
			tc := tls.Server(c, cfg)
			tc.SetDeadline(time.Now().Add(handshakeTimeout))
			if err := tc.Handshake(); err != nil {
				log.Warn("pod agent: refused a connection", "remote", c.RemoteAddr().String(), "err", err)
				c.Close()
				return
			}
			tc.SetDeadline(time.Time{})
			if !claimed.CompareAndSwap(false, true) {
				tc.Close()
				return
			}
			control <- tc
		}()
	}
}

// readInit reads the control plane's first frame.
func readInit(conn net.Conn) (protocol.Init, error) {
	var init protocol.Init
	conn.SetReadDeadline(time.Now().Add(initTimeout))
	defer conn.SetReadDeadline(time.Time{})
	f, err := protocol.ReadFrame(conn)
	if err != nil {
		return init, fmt.Errorf("read init: %w", err)
	}
	if f.Kind != protocol.KindInit || json.Unmarshal(f.Payload, &init) != nil {
		return init, errors.New("the first frame is not a valid init")
	}
	return init, nil
}

// prepare readies the agent to serve in a pod: rlimits, a subreaper (the
// agent may not be PID 1), no new privileges for anything it starts, the
// container's memory.events for OOM kills, /workspace.
func prepare(init *protocol.Init) (*os.File, error) {
	if err := agent.SetRlimits(*init); err != nil {
		return nil, err
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("become a subreaper: %w", err)
	}
	if _, _, e := syscall.AllThreadsSyscall(syscall.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0); e != 0 {
		return nil, fmt.Errorf("no_new_privs: %w", e)
	}
	init.Cgroup = protocol.CgroupFDs{}
	if fd, err := unix.Open("/sys/fs/cgroup/memory.events", unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
		init.Cgroup.OOM = fd // the container's cgroup (cgroup v2, its own namespace)
	}
	ws, err := os.OpenFile(agent.WorkspacePath, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, fmt.Errorf("open workspace: %w", err)
	}
	return ws, nil
}
