package linux

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/cubicle-sandbox/cubicle/internal/agent"
	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/linux/disk"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/linux/seccomp"
)

// Config configures the driver.
type Config struct {
	// StateDir holds computers' disks and records (StateDir/computers) and
	// cached filesystem templates (StateDir/templates).
	StateDir string
	// AgentPath is the cubicle binary whose agent computers run: the lean
	// agent it carries (see agentbin) or, without one, the binary itself;
	// default this process's binary.
	AgentPath string
	// Logger for teardown problems; default slog.Default().
	Logger *slog.Logger
	// UIDStart and UIDCount are the host uids computers run as, one per
	// live computer (its uid 1000 inside, through a user namespace, and the
	// gid of the same number); both zero: DefaultUIDStart, DefaultUIDCount.
	// The range must not hold a host user, group or subordinate range.
	UIDStart, UIDCount uint32
	// Network gives computers with sandbox.NetworkInternet their
	// interface (internal/egress); nil: such computers are refused.
	Network sandbox.Network
}

// Driver creates computers on this Linux host.
type Driver struct {
	cfg       Config
	computers string
	templates *disk.Templates
	ids       *hostIDs
	roots     rootImages // templates' images in use (sandbox.Root)
	log       *slog.Logger
	agentOnce sync.Once
	agent     string // the executable computers' agents run (agentexe.go), once one is made
}

// agentExecutable returns what computers' agents run, found at the first
// computer.
func (d *Driver) agentExecutable() string {
	d.agentOnce.Do(func() { d.agent = agentExecutable(d.cfg.StateDir, d.cfg.AgentPath) })
	return d.agent
}

var _ sandbox.Driver = (*Driver)(nil)

// New checks that this host can enforce a computer's limits and prepares
// the state directory. It refuses, saying what is missing, when it cannot.
func New(cfg Config) (*Driver, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.StateDir == "" {
		return nil, fmt.Errorf("linux driver: no state directory configured")
	}
	if err := preflight(); err != nil {
		return nil, err
	}
	d := &Driver{
		cfg:       cfg,
		computers: filepath.Join(cfg.StateDir, "computers"),
		templates: disk.NewTemplates(filepath.Join(cfg.StateDir, "templates")),
		log:       cfg.Logger,
	}
	if err := os.MkdirAll(d.computers, 0o700); err != nil {
		return nil, fmt.Errorf("create state directory: %w", err)
	}
	ids, err := newHostIDs(cfg.StateDir, cfg.UIDStart, cfg.UIDCount)
	if err != nil {
		return nil, fmt.Errorf("linux driver: %w", err)
	}
	d.ids = ids
	return d, nil
}

// Close waits for the unlinks of destroyed computers' images still under
// way (disk.Templates.Discard), so that nothing of the driver writes to
// the state directory's filesystem once its owner stopped.
func (d *Driver) Close(ctx context.Context) error {
	d.templates.AwaitDiscards(ctx)
	return ctx.Err()
}

var _ sandbox.Closer = (*Driver)(nil)

// Create starts a computer.
func (d *Driver) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if spec.Network == "" {
		spec.Network = sandbox.NetworkNone
	}
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if spec.Network == sandbox.NetworkInternet && d.cfg.Network == nil {
		return nil, fmt.Errorf("%w: network: this host gives computers no internet (egress is not configured)", sandbox.ErrInvalidSpec)
	}
	return d.create(ctx, sandbox.NewID(), spec, false)
}

// create starts computer id; resumed, with the paused image of id as its
// disk, which a failed start puts back.
func (d *Driver) create(ctx context.Context, id string, spec sandbox.Spec, resumed bool) (*computer, error) {
	d.prepareLauncher()
	c := &computer{id: id, spec: spec, driver: d, done: make(chan struct{}), resumed: resumed}
	c.dir = computerDir(filepath.Join(d.computers, c.id))
	if err := c.start(ctx); err != nil {
		end := endDestroy
		if resumed {
			end = endPause
		}
		c.teardown(context.WithoutCancel(ctx), end)
		return nil, err
	}
	return c, nil
}

// tmpBytes sizes /tmp: memory-backed, so at most a quarter of the memory
// limit and never more than the disk.
func tmpBytes(spec sandbox.Spec) int64 {
	return min(spec.MemoryBytes/4, spec.DiskBytes)
}

func (c *computer) start(ctx context.Context) error {
	if err := os.Mkdir(string(c.dir), 0o700); err != nil {
		return fmt.Errorf("create computer directory: %w", err)
	}
	lock, err := c.dir.lock(true)
	if err != nil {
		return fmt.Errorf("lock computer directory: %w", err)
	}
	c.lock = lock
	if c.uid, err = c.driver.ids.take(c.id); err != nil {
		return err
	}
	c.rec = record{ID: c.id, HostUID: c.uid.uid}
	if err := c.dir.write(c.rec); err != nil {
		return fmt.Errorf("write computer record: %w", err)
	}
	image := c.dir.path(imageFile)
	if c.resumed {
		if err := os.Rename(c.driver.pausedPath(c.id), image); err != nil {
			return fmt.Errorf("take the paused workspace disk: %w", err)
		}
	} else if err := c.driver.templates.Create(ctx, image, c.spec.DiskBytes); err != nil {
		return fmt.Errorf("create workspace disk: %w", err)
	}
	loop, err := disk.Attach(ctx, image, false)
	if err != nil {
		return fmt.Errorf("attach workspace disk: %w", err)
	}
	defer loop.Close() // once mounted inside the computer, the mount holds the device
	c.cg, err = createUserCgroup(c.id, c.spec)
	if err != nil {
		loop.Detach()
		return err
	}
	c.rec.Cgroups = c.cg.paths
	if err := c.dir.write(c.rec); err != nil {
		loop.Detach()
		return fmt.Errorf("write computer record: %w", err)
	}
	if err := os.Mkdir(c.dir.path(rootDir), 0o700); err != nil {
		loop.Detach()
		return err
	}
	if err := c.launch(ctx, loop.Path); err != nil {
		loop.Detach()
		return err
	}
	return nil
}

// launch starts the agent and waits for it to report the computer ready.
func (c *computer) launch(ctx context.Context, device string) error {
	files, cgfds, err := c.cg.agentFDs(controlFD + 1)
	if err != nil {
		return err
	}
	defer closeAll(files)
	var root *os.File // a template's image, or nil for the host's runtime
	if c.spec.Root.Image != "" {
		if root, c.rootRelease, err = c.driver.roots.clone(ctx, c.spec.Root.Image); err != nil {
			return err
		}
	}
	vols, err := c.driver.attachVolumes(ctx, c.spec)
	if err != nil {
		return err
	}
	defer closeVolumes(vols) // once mounted, the mounts hold the devices
	hm, err := makeHostMounts(device, root, c.spec.Root.Build, vols)
	if err != nil {
		return err
	}
	c.upper, hm.upper = hm.upper, nil
	defer hm.close()
	hmFiles, hostFDs := hm.files(controlFD + 1 + len(files))
	files = append(files, hmFiles...)
	mountFiles, mounts, err := openMounts(c.spec, controlFD+1+len(files))
	if err != nil {
		return err
	}
	defer closeAll(mountFiles)
	files = append(files, mountFiles...)
	mounts = append(mounts, volumeMounts(vols, controlFD+1+len(files))...)
	files = append(files, hm.volumes...)
	hostEnd, agentEnd, err := socketpair()
	if err != nil {
		return err
	}
	c.proc, err = c.driver.startAgent(append([]*os.File{agentEnd}, files...), c.uid.uid, &c.stderr, c.done)
	agentEnd.Close() // the agent has it now; if it dies, the host sees end of file at once
	if err != nil {
		hostEnd.Close()
		return err
	}
	c.rec.AgentPid = c.proc.pid
	c.rec.AgentStart, _ = procStart(c.rec.AgentPid)
	if err := c.dir.write(c.rec); err != nil {
		hostEnd.Close()
		return fmt.Errorf("write computer record: %w", err)
	}
	// The interface is made while the agent boots; see attachNetwork.
	nameserver, env, err := c.attachNetwork(ctx)
	if err != nil {
		hostEnd.Close()
		return err
	}
	if err := idmapMounts(c.rec.AgentPid, hm.idmapped(), mountFiles); err != nil {
		hostEnd.Close()
		return err
	}
	init := protocol.Init{
		Hostname: "computer", RootDir: c.dir.path(rootDir), Host: hostFDs,
		TmpBytes: tmpBytes(c.spec), ShmBytes: min(64<<20, c.spec.MemoryBytes/4),
		Env: append(slices.Clip(c.spec.Env), env...), Cgroup: cgfds, Timeout: protocol.Millis(c.spec.Timeout),
		MaxFile: c.spec.DiskBytes, MemoryHint: c.spec.MemoryBytes, Mounts: mounts,
		Nameserver: nameserver, Python: sandbox.DefaultPython,
	}
	if c.spec.Root.Image != "" {
		init.RootImage, init.Python, init.Build = true, c.spec.Root.Python, c.spec.Root.Build
	}
	if c.net != nil {
		init.CACert = string(c.net.CACert())
	}
	filter, err := seccomp.Default() // compiled once per process, loaded by every agent
	if err != nil {
		hostEnd.Close()
		return err
	}
	init.Seccomp = filter.Bytes()
	if err := agent.Handshake(ctx, hostEnd, init); err != nil {
		hostEnd.Close()
		return c.bootError(err)
	}
	c.client = agent.NewClient(hostEnd)
	// Opened now, before any user code ran in the computer.
	if c.pids, err = openPIDs(c.rec.AgentPid); err != nil {
		return err
	}
	if c.net != nil {
		if err := c.net.Wait(ctx); err != nil {
			return err
		}
	}
	return c.writeNetworkEnv(ctx, env)
}

// NetworkEnvFile is where an internet computer finds its network's
// environment (the proxy variables) as NAME=value lines, for programs
// that do not inherit it.
const NetworkEnvFile = "/workspace/.cubicle/proxy.env"

// writeNetworkEnv writes the network's environment into the computer
// (nothing for a computer without one), as the sandbox user, mode 0600.
func (c *computer) writeNetworkEnv(ctx context.Context, env []string) error {
	if len(env) == 0 {
		return nil
	}
	content := strings.Join(env, "\n") + "\n"
	if _, err := c.client.WriteFile(ctx, sandbox.FileWrite{Path: NetworkEnvFile, Mode: 0o600, Parents: true},
		strings.NewReader(content)); err != nil {
		return fmt.Errorf("write %s: %w", NetworkEnvFile, err)
	}
	return nil
}

// bootError adds what the agent printed, bounded, to a failed start.
func (c *computer) bootError(err error) error {
	if out := c.stderr.String(); out != "" {
		return fmt.Errorf("%w (agent output: %s)", err, out)
	}
	return err
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

var errDestroyed = errors.New("computer destroyed")

// attachNetwork starts giving an internet computer its interface, made
// while the agent boots (launch waits for it before the computer is
// anyone's, so before any of its processes runs), and returns the
// nameserver its /etc/resolv.conf names ("" for NetworkNone) and the
// environment the network adds to every process.
func (c *computer) attachNetwork(ctx context.Context) (string, []string, error) {
	if c.spec.Network != sandbox.NetworkInternet {
		return "", nil, nil
	}
	netns := fmt.Sprintf("/proc/%d/ns/net", c.rec.AgentPid)
	link, err := c.driver.cfg.Network.Attach(ctx, sandbox.Attachment{ComputerID: c.id, Netns: netns,
		Owner: c.spec.Owner, Policy: c.spec.Internet})
	if err != nil {
		return "", nil, err
	}
	c.net = link
	return sandbox.Nameserver, link.Env(), nil
}
