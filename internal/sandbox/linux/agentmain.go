package linux

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/cubicle-sandbox/cubicle/internal/agent"
	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
)

// AgentArg is the hidden subcommand that runs the agent.
const AgentArg = "agent"

// controlFD is the control channel's descriptor in the agent; the agent's
// cgroup descriptors follow it.
const controlFD = 3

// serveArg marks the agent's second stage: the server, started by PID 1
// in the computer's user namespace once the computer is built.
const serveArg = "serve"

// IsAgent reports whether this process was started as a computer's agent:
// PID 1 of a new PID namespace invoked with the hidden subcommand, or the
// server stage that PID 1 starts.
func IsAgent() bool {
	if len(os.Args) < 2 || os.Args[1] != AgentArg {
		return false
	}
	_, serve := serveStage()
	return os.Getpid() == 1 || serve
}

// serveStage returns the init pipe's descriptor when this process is the
// server stage.
func serveStage() (int, bool) {
	if len(os.Args) != 4 || os.Args[2] != serveArg || os.Getppid() != 1 {
		return 0, false
	}
	fd, err := strconv.Atoi(os.Args[3])
	return fd, err == nil && fd > controlFD
}

// AgentMain runs the agent and returns the process exit code. It must be
// called early in main, before anything else starts goroutines that matter.
//
// The agent has two stages. PID 1, real root, builds the computer (root
// filesystem, hostname, network), starts the server stage in a new user
// namespace that maps the sandbox user to the computer's own host uid
// (and root to root), hands it the Init, drops every capability and waits
// for it. The server stage drops to the few capabilities it needs, loads
// seccomp and serves the control channel; user processes are its
// children, so they live in that user namespace too.
func AgentMain() int {
	// Descriptors inherited from whoever started the host process must never
	// reach user code; mark them all close-on-exec before anything else.
	unix.CloseRange(controlFD, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	conn := os.NewFile(controlFD, "control")
	if fd, ok := serveStage(); ok {
		return serveMain(conn, fd)
	}
	server, err := build(conn)
	if err != nil {
		reportError(conn, err)
		return 1
	}
	return server.wait()
}

func reportError(conn *os.File, err error) {
	b, _ := json.Marshal(protocol.WireError{Code: "internal", Message: "computer setup failed: " + err.Error()})
	buf, _ := protocol.AppendFrame(nil, protocol.Frame{Kind: protocol.KindError, Payload: b})
	conn.Write(buf)
}

// serveMain is the server stage: it takes the Init from PID 1, seals
// itself and serves.
func serveMain(conn *os.File, initFD int) int {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	init, err := receiveInit(os.NewFile(uintptr(initFD), "init"))
	if err != nil {
		return 1 // PID 1 failed before handing over, and said why
	}
	ws, spawner, err := seal(init)
	if err != nil {
		reportError(conn, err)
		return 1
	}
	srv := agent.NewServer(conn, init, ws, spawner, log)
	if err := srv.Serve(context.Background()); err != nil {
		log.Warn("agent stopped", "err", err)
		return 1
	}
	return 0
}

// seal prepares the server stage: orphans come to it, limits, the
// workspace descriptor, the spawner thread, privileges and seccomp.
func seal(init protocol.Init) (*os.File, *agent.Spawner, error) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return nil, nil, fmt.Errorf("become the subreaper: %w", err)
	}
	for _, l := range []struct {
		res int
		val uint64
	}{{unix.RLIMIT_CORE, 0}, {unix.RLIMIT_NOFILE, 4096}, {unix.RLIMIT_FSIZE, uint64(init.MaxFile)}} {
		if err := unix.Setrlimit(l.res, &unix.Rlimit{Cur: l.val, Max: l.val}); err != nil {
			return nil, nil, fmt.Errorf("set rlimit %d: %w", l.res, err)
		}
	}
	ws, err := os.OpenFile(agent.WorkspacePath, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open workspace: %w", err)
	}
	// The spawner thread must drop its bounding set while the agent still
	// has CAP_SETPCAP, i.e. before dropPrivileges.
	spawner, err := agent.NewSpawner(dropBoundingSet)
	if err == nil {
		err = dropPrivileges(agentCaps)
	}
	if err != nil {
		ws.Close()
		return nil, nil, err
	}
	return ws, spawner, nil
}

// build turns this fresh PID 1 into a computer and starts the server
// stage in it: root filesystem, hostname, network, the user namespace.
func build(conn *os.File) (*serverStage, error) {
	f, err := protocol.ReadFrame(conn)
	if err != nil {
		return nil, fmt.Errorf("read init: %w", err)
	}
	var init protocol.Init
	if f.Kind != protocol.KindInit || json.Unmarshal(f.Payload, &init) != nil {
		return nil, fmt.Errorf("first frame is not a valid init")
	}
	if init.HostUID == 0 {
		return nil, fmt.Errorf("init names no host uid for the sandbox user")
	}
	// The server starts first, so that its exec and runtime start overlap
	// with the build; it waits for its Init.
	server, err := startServer(conn, init)
	if err != nil {
		return nil, err
	}
	if err := finish(init, server); err != nil {
		server.kill()
		return nil, err
	}
	return server, nil
}

// finish builds the computer around the waiting server and hands it over.
func finish(init protocol.Init, server *serverStage) error {
	if err := buildRoot(init); err != nil {
		return err
	}
	if err := pivot(init.RootDir); err != nil {
		return err
	}
	if err := unix.Sethostname([]byte(init.Hostname)); err != nil {
		return fmt.Errorf("set hostname: %w", err)
	}
	if err := loopbackUp(); err != nil {
		return err
	}
	return server.handOver(init)
}

// loopbackUp brings up lo, the only interface of a new network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring loopback up: %w", err)
	}
	return nil
}
