package linux

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/cubicle-sandbox/cubicle/internal/agent"
	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
)

// AgentArg is the hidden subcommand that runs the agent.
const AgentArg = "agent"

// controlFD is the control channel's descriptor in the agent; the agent's
// cgroup descriptors follow it.
const controlFD = 3

// IsAgent reports whether this process was started by the driver from the
// agent executable: as a computer's agent (PID 1 of a new PID namespace
// invoked with the hidden subcommand) or as the launcher that forks the
// agents (LauncherArg, with the driver's socket; launcher.go).
func IsAgent() bool {
	return len(os.Args) >= 2 && os.Args[1] == AgentArg && os.Getpid() == 1 || isLauncher()
}

// AgentMain runs the agent, or the launcher, and returns the process exit
// code. It must be called early in main, before anything else starts
// goroutines that matter.
//
// The agent is PID 1 of the computer, in the computer's user namespace
// from its first instruction (root inside, mapped to the host's root; the
// sandbox user to the computer's own host uid). It builds the computer
// (root filesystem from what it may mount and what the host mounted for
// it, hostname, network), drops to the few capabilities it needs, loads
// seccomp and serves the control channel; user processes are its children.
func AgentMain() int {
	if isLauncher() {
		return launcherMain()
	}
	// One P (the launcher sets GOMAXPROCS=1 too, for the runtime's own
	// start): the agent then needs few threads (docs/ARCHITECTURE.md,
	// "Threads").
	runtime.GOMAXPROCS(1)
	// This goroutine keeps its thread, the main one (see init below), for
	// life: it becomes the spawner (seal).
	runtime.LockOSThread()
	// Descriptors inherited from whoever started the host process must never
	// reach user code; mark them all close-on-exec before anything else.
	unix.CloseRange(controlFD, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	// Non-blocking, so that a read waits in the netpoller rather than
	// holding a thread in read(2) for as long as the computer is idle.
	if err := unix.SetNonblock(controlFD, true); err != nil {
		return 1
	}
	conn := os.NewFile(controlFD, "control")
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	init, err := build(conn)
	if err != nil {
		agent.ReportSetupError(conn, err)
		return 1
	}
	ws, spawner, err := seal(init)
	if err != nil {
		agent.ReportSetupError(conn, err)
		return 1
	}
	srv := agent.NewServer(conn, init, ws, spawner, log)
	served := make(chan struct{})
	var serveErr error
	go func() {
		serveErr = srv.Serve(context.Background())
		close(served)
	}()
	spawner.Run(served)
	if serveErr != nil {
		log.Warn("agent stopped", "err", serveErr)
		return 1
	}
	return 0
}

// init keeps the agent's main goroutine on the process's main
// thread (a LockOSThread in an init function does: the Go runtime then
// calls main on that thread). That thread is the one with the parent-death
// signal the launcher set, and the spawner's (AgentMain): no other
// goroutine ever runs on it, so none can change its identity, and the
// spawner costs no thread of its own.
func init() {
	if len(os.Args) >= 2 && os.Args[1] == AgentArg && os.Getpid() == 1 {
		runtime.LockOSThread()
	}
}

// seal prepares the agent to serve: limits, the workspace descriptor, the
// spawner thread (the calling one, locked), privileges and seccomp.
func seal(init protocol.Init) (*os.File, *agent.Spawner, error) {
	if err := agent.SetRlimits(init); err != nil {
		return nil, nil, err
	}
	ws, err := os.OpenFile(agent.WorkspacePath, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open workspace: %w", err)
	}
	// The spawner thread (this one) must drop its bounding set while the
	// agent still has CAP_SETPCAP, i.e. before dropPrivileges.
	keep := keptCaps(init.Build)
	err = dropBoundingSet(keep)
	if err != nil {
		err = fmt.Errorf("spawner thread: %w", err)
	} else {
		err = dropPrivileges(init.Seccomp, keep)
	}
	if err != nil {
		ws.Close()
		return nil, nil, err
	}
	return ws, agent.NewSpawner(), nil
}

// build turns this fresh PID 1 into a computer: root filesystem,
// hostname, network, extra mounts; / read-only.
func build(conn *os.File) (protocol.Init, error) {
	var init protocol.Init
	f, err := protocol.ReadFrame(conn)
	if err != nil {
		return init, fmt.Errorf("read init: %w", err)
	}
	if f.Kind != protocol.KindInit || json.Unmarshal(f.Payload, &init) != nil {
		return init, fmt.Errorf("first frame is not a valid init")
	}
	if err := buildRoot(init); err != nil {
		return init, err
	}
	if err := pivot(init.RootDir); err != nil {
		return init, err
	}
	if err := unix.Sethostname([]byte(init.Hostname)); err != nil {
		return init, fmt.Errorf("set hostname: %w", err)
	}
	if err := loopbackUp(); err != nil {
		return init, err
	}
	if err := bindExtra("", init); err != nil {
		return init, err
	}
	if init.RootImage {
		return init, nil // mounted read-only by the host
	}
	return init, rootReadOnly()
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
