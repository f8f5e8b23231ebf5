package sandbox

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path"
	"slices"
	"strings"
	"time"
)

// NewID returns a random computer id such as cmp_3f9c1a7b2d4e6f80a1b2c3d4,
// for drivers to name their computers.
func NewID() string {
	var b [12]byte
	rand.Read(b[:])
	return fmt.Sprintf("cmp_%x", b)
}

// Driver creates computers.
type Driver interface {
	// Create starts a computer and returns once its agent answers.
	Create(ctx context.Context, spec Spec) (Sandbox, error)
	// GC removes what crashed owners left behind: processes, cgroups, loop
	// devices, mounts and directories of computers whose owner is gone.
	GC(ctx context.Context) (GCReport, error)
}

// GCReport counts what GC removed.
type GCReport struct {
	Computers int `json:"computers"`
	Cgroups   int `json:"cgroups"`
	Loops     int `json:"loops"`
	Mounts    int `json:"mounts"`
}

// Sandbox is one running computer: everything a driver's computer does.
// Consumers take the narrowest of its parts that they need.
type Sandbox interface {
	Lifecycle
	Processes
	Background
	Files
	Python
	Kernels
	Terminals
}

// Lifecycle is who a computer is and how it ends.
type Lifecycle interface {
	ID() string
	Spec() Spec
	// Kill SIGKILLs every process in the computer and returns once none of
	// them can run code or make a system call again. It frees nothing:
	// Destroy must still be called. It is idempotent.
	Kill(ctx context.Context) error
	// Destroy kills everything in the computer and removes all its
	// resources. It is idempotent.
	Destroy(ctx context.Context) error
	// Keep stops the computer like Destroy but keeps its workspace, mounted
	// read-write on the host, and returns that path (for debugging).
	Keep(ctx context.Context) (string, error)
	// Done is closed once the computer's agent has exited, whether Kill or
	// Destroy ended it or it died by itself (a crash, a SIGKILL from the
	// host): nothing runs in the computer any more. A nil channel means
	// the driver cannot tell.
	Done() <-chan struct{}
	// ExitReason says how the agent ended ("killed by signal 9 (SIGKILL)"),
	// once Done is closed; "" before.
	ExitReason() string
}

// Named is a driver that lacks some optional parts (Pauser, Volumer...)
// by design, not for want of host support: callers refusing those say so
// naming it ("the kubernetes driver cannot pause computers") as a client
// error, not as an unavailable host.
type Named interface {
	DriverName() string
}

// Closer is a driver with work of its own to finish when its owner stops
// (after the last computer's Destroy).
type Closer interface {
	Close(ctx context.Context) error
}

// Pauser is a computer that can stop while keeping its workspace, for a
// later Resumer.Resume with its id.
type Pauser interface {
	// Pause ends the computer like Destroy (every process dies), but keeps
	// its workspace disk, unmounted, exactly as its processes left it.
	Pause(ctx context.Context) error
}

// Resumer is a driver that resumes paused computers.
type Resumer interface {
	// Resume starts the paused computer id again, with spec's limits and
	// its workspace as it was paused (spec.DiskBytes is the disk's size).
	// ErrNoPaused when there is no paused computer id; when the start
	// fails, it stays paused.
	Resume(ctx context.Context, id string, spec Spec) (Sandbox, error)
	// DiscardPaused removes the workspace of the paused computer id (none:
	// nil).
	DiscardPaused(ctx context.Context, id string) error
}

// Limiter is a driver whose running computers can take other memory and
// process limits: a warm-pool computer claimed by a create that asked for
// other limits.
type Limiter interface {
	// SetLimits puts spec's MemoryBytes and Pids (and CPUs, when set) in
	// force on sb, one of this driver's computers. It refuses
	// (ErrLimitsBelowUse) a memory limit that what the computer holds now
	// would not fit under with room to spare, so the change never
	// OOM-kills a process; the computer keeps its limits then.
	SetLimits(ctx context.Context, sb Sandbox, spec Spec) error
}

// ErrLimitsBelowUse is SetLimits refusing a memory limit under what the
// computer uses.
var ErrLimitsBelowUse = errors.New("the computer already uses more memory than the new limit leaves room for")

// Volumer is a driver that keeps volumes: named disks that outlive
// computers, mounted into them (Spec.Volumes).
type Volumer interface {
	// CreateVolume makes volume id, an empty filesystem of sizeBytes
	// whose root the sandbox user owns.
	CreateVolume(ctx context.Context, id string, sizeBytes int64) error
	// DeleteVolume removes volume id (none: nil). It must not be mounted.
	DeleteVolume(ctx context.Context, id string) error
}

// VolumeMount mounts volume ID at Target in a computer.
type VolumeMount struct {
	ID       string `json:"id"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"read_only,omitempty"`
}

// ErrNoPaused is a Resume of a computer whose workspace is not kept.
var ErrNoPaused = errors.New("no paused workspace of that computer is kept on this host")

// Processes runs processes in a computer.
type Processes interface {
	// Exec runs a process to completion. Cancelling ctx kills the process
	// tree; Exec returns after it was reaped.
	Exec(ctx context.Context, req ExecRequest, sio ExecIO) (ExitStatus, error)
}

// Background runs processes that outlive the call that starts them: the
// computer holds each one and the newest output (a bounded ring) until it
// is forgotten. They die with the computer.
type Background interface {
	StartProcess(ctx context.Context, req ProcessStart) (ProcessInfo, error)
	// ListProcesses lists the processes the computer holds, oldest first.
	ListProcesses(ctx context.Context) ([]ProcessInfo, error)
	GetProcess(ctx context.Context, id string) (ProcessInfo, error)
	// ProcessOutput reads output (see OutputRequest); cancelling ctx ends a
	// follow, which then answers ctx's error.
	ProcessOutput(ctx context.Context, req OutputRequest, out OutputIO) (OutputEnd, error)
	WriteStdin(ctx context.Context, req StdinWrite) (StdinResult, error)
	// SignalProcess sends sig to the process (SIGKILL: its whole tree)
	// and waits up to wait for it to exit.
	SignalProcess(ctx context.Context, id string, sig int, wait time.Duration) (ProcessInfo, error)
}

// Files moves files in and out of a computer's /workspace, with the
// sandbox user's permissions.
type Files interface {
	// WriteFile uploads r; the file appears atomically when complete.
	WriteFile(ctx context.Context, req FileWrite, r io.Reader) (Written, error)
	ReadFile(ctx context.Context, req FileRead, w io.Writer) (DataEnd, error)
	Stat(ctx context.Context, path string) (FileInfo, error)
	List(ctx context.Context, path string) (Listing, error)
	Mkdir(ctx context.Context, path string, parents bool) error
	Remove(ctx context.Context, path string, recursive bool) error
	// Move renames a file or directory; an existing target is replaced
	// only with overwrite (ErrExists otherwise).
	Move(ctx context.Context, from, to string, overwrite bool) error
	// WriteTar extracts the tar archive r into a directory (see TarWrite);
	// it fails with ErrInvalid naming the entry of a hostile archive, and
	// ErrTooLarge past the request's limits.
	WriteTar(ctx context.Context, req TarWrite, r io.Reader) (TarDone, error)
	// ReadTar writes a directory as a tar archive to w (see TarRead);
	// over its limits it fails before anything is written.
	ReadTar(ctx context.Context, req TarRead, w io.Writer) (TarDone, error)
}

// Python runs code in a computer's session kernel.
type Python interface {
	// Python runs cells in the computer's kernel; onOutput (may be nil) receives every
	// output as it happens, from one goroutine. Cancelling ctx interrupts the kernel
	// (escalating to a restart) and returns a cancelled result.
	Python(ctx context.Context, req PythonRequest, onOutput func(PythonOutput)) (PythonResult, error)
	// PythonControl interrupts ("interrupt") or restarts ("restart") the session kernel.
	PythonControl(ctx context.Context, action string) error
}

// Kernels relays a kernel of the computer's own to a Jupyter client.
type Kernels interface {
	// OpenKernel starts a kernel of its own in the computer (not the session
	// kernel) and relays its messages; one per computer at a time.
	OpenKernel(ctx context.Context, start KernelStart) (Kernel, error)
}

// NetworkMode says what a computer can reach.
type NetworkMode string

// Network modes.
const (
	// NetworkNone gives a computer only its own loopback interface.
	NetworkNone NetworkMode = "none"
	// NetworkInternet adds one interface whose every packet is handled by
	// the driver's Network under the Spec's Internet policy.
	NetworkInternet NetworkMode = "internet"
)

// InternetPolicy is what a computer with NetworkInternet may reach; the
// private-address rule and the deployment's blocklist always apply on top.
type InternetPolicy struct {
	// Domains are names reached by name: "example.com" (that name) or
	// "*.example.com" (any name below it).
	Domains []string `json:"domains,omitempty"`
	// CIDRs are the addresses reachable as IP literals.
	CIDRs []netip.Prefix `json:"cidrs,omitempty"`
	// Secrets are HTTP headers the Network adds to every request to
	// their domain over TLS (it intercepts those domains only), so code
	// in the computer never sees them. Never serialised (json:"-"): a
	// Spec written anywhere carries no secret value.
	Secrets []DomainSecret `json:"-"`
}

// DomainSecret is a header Cubicle sets on every HTTPS request to Domain
// ("api.example.com", or "*.example.com" for any name below it): Name is
// the header's name, Value its value (replacing one the request had).
type DomainSecret struct {
	Domain, Name, Value string
}

// String names the secret without its value, so that printing or logging
// one never shows the value.
func (s DomainSecret) String() string { return s.Domain + " " + s.Name + ": [redacted]" }

// GoString is String, for %#v.
func (s DomainSecret) GoString() string { return s.String() }

// Nameserver is the resolver an internet computer's /etc/resolv.conf
// names: the next hop of its interface, where the Network answers DNS.
const Nameserver = "10.200.0.1"

// Network connects computers with NetworkInternet to the host's egress. The
// driver calls Attach once per such computer, with the path of the
// computer's network namespace, as soon as that exists; Attach returns what
// the computer's start needs (Env, CACert) and makes the interface in the
// background, while the computer boots. The driver waits for Link.Wait
// before it gives the computer to anyone (before any process of it runs),
// and closes the Link when the computer stops (every open connection
// ends).
type Network interface {
	Attach(ctx context.Context, a Attachment) (Link, error)
}

// Attachment is one computer's side of Network.Attach.
type Attachment struct {
	ComputerID string
	Netns      string // the path of the computer's network namespace
	Owner      Owner
	Policy     InternetPolicy
}

// Owner is who a computer was created for (organisation and key ids), for
// the records its network keeps.
type Owner struct {
	Org string `json:"org,omitempty"`
	Key string `json:"key,omitempty"`
}

// NetworkCutter is a computer whose internet can be taken away while it
// runs: every connection ends and only loopback is left.
type NetworkCutter interface {
	CutNetwork() error
}

// Link is a computer's attached network.
type Link interface {
	io.Closer
	// Wait returns once the computer's interface is up, or the reason it
	// could not be made.
	Wait(ctx context.Context) error
	// Env is what every process of the computer gets in its environment
	// (the proxy variables, with credentials valid for this computer
	// only, and the variables that point TLS clients at CABundleFile).
	Env() []string
	// CACert is the PEM certificate of the computer's own certificate
	// authority, with which the Network intercepts the TLS of the domains
	// that have Secrets (every other domain is spliced, never
	// intercepted); nil for a computer without secrets. Its private key
	// never leaves the Network. The driver adds it to the computer's
	// system trust store, CABundleFile.
	CACert() []byte
}

// CABundleFile is an internet computer's system trust store: the host's
// roots and the computer's CA (Link.CACert), read-only. Env's
// SSL_CERT_FILE, REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE, NODE_EXTRA_CA_CERTS,
// PIP_CERT and GIT_SSL_CAINFO name it, for clients that read no system
// store by default.
const CABundleFile = "/etc/ssl/certs/ca-certificates.crt"

// Mount is an extra bind mount of a host path into the computer. The driver
// resolves Source once, on the host, and binds what it resolved to: a path
// that changes later (a directory swapped for a symlink) cannot redirect the
// mount.
type Mount struct {
	Source   string `json:"source" toml:"source"`
	Target   string `json:"target" toml:"target"`
	ReadOnly bool   `json:"read_only" toml:"read_only"`
	// Root, when set, is a directory whose contents tenants may change (a
	// Kernel Gateway mount root): Source must be a directory that is Root or
	// beneath it, and it is resolved from Root with no symlink, no magic
	// link and no ".." at any step (openat2 RESOLVE_BENEATH |
	// RESOLVE_NO_SYMLINKS). Anything else fails Create with ErrMountSource.
	Root string `json:"root,omitempty" toml:"root"`
}

// Spec is everything a computer is created with.
type Spec struct {
	MemoryBytes int64          `json:"memory_bytes"`
	Pids        int64          `json:"pids"`
	CPUs        float64        `json:"cpus"` // 0: no hard quota, fair share only
	DiskBytes   int64          `json:"disk_bytes"`
	Timeout     time.Duration  `json:"timeout"` // default wall time per process
	Network     NetworkMode    `json:"network"`
	Internet    InternetPolicy `json:"internet,omitzero"`
	Owner       Owner          `json:"owner,omitzero"`
	Mounts      []Mount        `json:"mounts,omitempty"`
	Env         []string       `json:"env,omitempty"`
	Root        Root           `json:"root,omitzero"`
	// Volumes are mounted at their targets (Volumer; at most MaxVolumes).
	Volumes []VolumeMount `json:"volumes,omitempty"`
}

// MaxVolumes is how many volumes one computer may mount.
const MaxVolumes = 8

// Root is the root filesystem of a computer made from a template: an
// EROFS image (internal/template) that becomes the computer's whole /,
// read-only, nosuid and nodev, with the computer's own /dev, /proc, /tmp,
// /workspace and generated /etc files mounted over the mount points the
// image has for them. The zero Root is the host's runtime (its /usr and a
// curated /etc, bound read-only).
type Root struct {
	Template string `json:"template,omitempty"` // its name, for messages
	Image    string `json:"image,omitempty"`    // the image file on the host
	// Python is the template's python3 with ipykernel, a path inside the
	// image; "" when it has none (Python calls then fail saying so).
	Python string `json:"python,omitempty"`
	// Prelude is the template's own Python prelude, which replaces the
	// deployment's in the computer's kernels ("": the deployment's).
	Prelude string `json:"prelude,omitempty"`
	// Build makes the computer a template build's (a run step's): its
	// root is writable, an overlay over the image whose upper layer is on
	// the computer's own disk (within DiskBytes; /workspace is a directory
	// beside it), and its processes run as root of its user namespace.
	// The driver must implement RootChanges. Never for tenants' computers.
	Build bool `json:"build,omitempty"`
}

// RootChanges is a build computer (Root.Build) whose root's changes can be
// read.
type RootChanges interface {
	// RootChanges returns, once the computer was killed (Kill), the upper
	// layer of its root's overlay: a directory the caller reads and
	// closes before Destroy. Deleted entries are overlayfs whiteouts
	// (character devices 0/0), directories that hide the lower layers'
	// content carry the xattr trusted.overlay.opaque "y". Files the
	// computer's user (uid 1000 inside) owns are owned by userUID.
	RootChanges(ctx context.Context) (dir *os.File, userUID uint32, err error)
}

// DefaultPython is the Python of a computer on the host's runtime.
const DefaultPython = "/usr/bin/python3"

// The least a computer may be given: below these a computer cannot start
// its agent. Validate refuses less, and so does the deployment's
// configuration (internal/config) at startup.
const (
	MinMemory = 16 << 20
	MinDisk   = 16 << 20
	MinPids   = 8
)

// Defaults of a computer when nothing else is asked for.
const (
	DefaultMemory  = 512 << 20
	DefaultPids    = 256
	DefaultCPUs    = 1
	DefaultDisk    = 1 << 30
	DefaultTimeout = 30 * time.Second
)

// Defaults of a directory transfer as tar (TarWrite, TarRead), when the
// deployment sets none: the archive's files together, and its entries.
// The computer's disk bounds an extraction as well (ErrNoSpace).
const (
	DefaultMaxTarBytes   = 2 << 30
	DefaultMaxTarEntries = 100000
)

// DefaultSpec is a computer with the default limits.
func DefaultSpec() Spec {
	return Spec{
		MemoryBytes: DefaultMemory, Pids: DefaultPids, CPUs: DefaultCPUs,
		DiskBytes: DefaultDisk, Timeout: DefaultTimeout, Network: NetworkNone,
	}
}

// Validate checks limits and names the first bad field.
func (s Spec) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidSpec, field, fmt.Sprintf(format, args...))
	}
	switch {
	case s.MemoryBytes < MinMemory:
		return bad("memory", "must be at least %dM, got %d bytes", MinMemory>>20, s.MemoryBytes)
	case s.MemoryBytes > 1<<40:
		return bad("memory", "must be at most 1T")
	case s.Pids < MinPids || s.Pids > 1<<22:
		return bad("pids", "must be between %d and 4194304, got %d", MinPids, s.Pids)
	case s.CPUs < 0 || s.CPUs > 1024:
		return bad("cpus", "must be between 0 and 1024, got %g", s.CPUs)
	case s.CPUs > 0 && s.CPUs < 0.01:
		return bad("cpus", "must be at least 0.01, got %g", s.CPUs)
	case s.DiskBytes < MinDisk:
		return bad("disk", "must be at least %dM, got %d bytes", MinDisk>>20, s.DiskBytes)
	case s.DiskBytes > 1<<42:
		return bad("disk", "must be at most 4T")
	case s.Timeout < 0:
		return bad("timeout", "must not be negative")
	case s.Network != NetworkNone && s.Network != "" && s.Network != NetworkInternet:
		return bad("network", "must be %q or %q, got %q", NetworkNone, NetworkInternet, s.Network)
	case s.Network != NetworkInternet && (len(s.Internet.Domains) > 0 || len(s.Internet.CIDRs) > 0):
		return bad("network", "an internet policy needs network %q", NetworkInternet)
	}
	if err := s.Internet.Validate(); err != nil {
		return err
	}
	if s.Root.Build && s.Root.Image == "" {
		return bad("template", "a build computer needs a template's image")
	}
	if s.Root.Image != "" && !path.IsAbs(s.Root.Image) || s.Root.Python != "" && !path.IsAbs(s.Root.Python) {
		return bad("template", "the image and its Python must be absolute paths: %q, %q", s.Root.Image, s.Root.Python)
	}
	for _, kv := range s.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" || strings.ContainsAny(kv, "\x00") {
			return bad("env", "%q is not NAME=value", kv)
		}
	}
	for _, m := range s.Mounts {
		if !path.IsAbs(m.Source) || !path.IsAbs(m.Target) {
			return bad("mounts", "source and target must be absolute paths: %q -> %q", m.Source, m.Target)
		}
		if path.Clean(m.Target) == "/" || reserved(m.Target) {
			return bad("mounts", "target %q is reserved", m.Target)
		}
		if m.Root != "" && !beneath(m.Root, m.Source) {
			return bad("mounts", "source %q is not beneath its root %q", m.Source, m.Root)
		}
	}
	if len(s.Volumes) > MaxVolumes {
		return bad("volumes", "at most %d", MaxVolumes)
	}
	targets := map[string]bool{}
	for _, m := range s.Mounts {
		targets[path.Clean(m.Target)] = true
	}
	for _, v := range s.Volumes {
		if !strings.HasPrefix(v.ID, "vol_") || len(v.ID) > 64 || strings.ContainsAny(v.ID, "/.\x00") {
			return bad("volumes", "%q is not a volume id", v.ID)
		}
		if err := CheckTarget(v.Target); err != nil {
			return bad("volumes", "%v", err)
		}
		if targets[v.Target] {
			return bad("volumes", "two mounts at %s", v.Target)
		}
		targets[v.Target] = true
	}
	return nil
}

// CheckTarget says why target cannot be where a volume is mounted: it
// must be a clean absolute path of at most 256 bytes, not / and not in
// the computer's own filesystems (/proc, /dev, /sys, /workspace, /tmp,
// /etc).
func CheckTarget(target string) error {
	switch {
	case !path.IsAbs(target) || path.Clean(target) != target || len(target) > 256 || strings.ContainsAny(target, "\x00\n"):
		return fmt.Errorf("%q is not a clean absolute path of at most 256 bytes", target)
	case target == "/" || reserved(target):
		return fmt.Errorf("%q is reserved (/, /proc, /dev, /sys, /workspace, /tmp and /etc are the computer's own)", target)
	}
	return nil
}

// beneath reports whether p is root or a path below it (lexically).
func beneath(root, p string) bool {
	if !path.IsAbs(root) || path.Clean(p) != p {
		return false
	}
	r := path.Clean(root)
	return p == r || strings.HasPrefix(p, strings.TrimSuffix(r, "/")+"/")
}

func reserved(target string) bool {
	t := path.Clean(target)
	for _, r := range []string{"/proc", "/dev", "/sys", "/workspace", "/tmp", "/etc"} {
		if t == r || strings.HasPrefix(t, r+"/") {
			return true
		}
	}
	return false
}

// NormalDomain lowercases a DNS name and drops its final dot; ok is false
// for anything but letters, digits, hyphens and underscores in
// dot-separated labels of DNS's lengths.
func NormalDomain(s string) (string, bool) {
	s = strings.ToLower(strings.TrimSuffix(s, "."))
	if s == "" || len(s) > 253 {
		return "", false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return "", false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return "", false
			}
		}
	}
	return s, true
}

// MaxSecrets bounds a policy's Secrets; MaxSecretValue one value's bytes.
const (
	MaxSecrets     = 64
	MaxSecretValue = 8 << 10
)

// reservedHeaders are headers a secret may not set: they frame the
// request or the connection, so setting them could split or smuggle one.
var reservedHeaders = []string{"host", "content-length", "transfer-encoding", "connection", "upgrade",
	"te", "trailer", "keep-alive", "expect", "proxy-authorization", "proxy-connection", "proxy-authenticate"}

// ValidateSecrets checks domain secrets, naming the first bad one (never
// its value): a domain name or *.domain, a header name (an RFC 9110
// token) that is not one of the request's framing, a value without
// control characters of at most MaxSecretValue bytes.
func ValidateSecrets(list []DomainSecret) error {
	if len(list) > MaxSecrets {
		return fmt.Errorf("at most %d domain secrets", MaxSecrets)
	}
	for _, s := range list {
		if _, ok := NormalDomain(strings.TrimPrefix(s.Domain, "*.")); !ok {
			return fmt.Errorf("domain secret: %q is not a domain name or *.domain", s.Domain)
		}
		if s.Name == "" || strings.IndexFunc(s.Name, func(r rune) bool { return !isTokenChar(r) }) >= 0 {
			return fmt.Errorf("domain secret for %s: %q is not an HTTP header name", s.Domain, s.Name)
		}
		if slices.Contains(reservedHeaders, strings.ToLower(s.Name)) {
			return fmt.Errorf("domain secret for %s: the header %s cannot be set", s.Domain, s.Name)
		}
		if s.Value == "" || len(s.Value) > MaxSecretValue || strings.IndexFunc(s.Value, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) >= 0 {
			return fmt.Errorf("domain secret %s for %s: the value must be 1 to %d bytes without control characters", s.Name, s.Domain, MaxSecretValue)
		}
	}
	return nil
}

// isTokenChar reports whether r may be in an HTTP token (RFC 9110 §5.6.2).
func isTokenChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", r)
}

// Validate checks the policy's entries, naming the first bad one.
func (p InternetPolicy) Validate() error {
	for _, d := range p.Domains {
		if _, ok := NormalDomain(strings.TrimPrefix(d, "*.")); !ok {
			return fmt.Errorf("%w: network: %q is not a domain name or *.domain", ErrInvalidSpec, d)
		}
	}
	for _, c := range p.CIDRs {
		if !c.IsValid() {
			return fmt.Errorf("%w: network: an invalid CIDR", ErrInvalidSpec)
		}
	}
	if err := ValidateSecrets(p.Secrets); err != nil {
		return fmt.Errorf("%w: network: %v", ErrInvalidSpec, err)
	}
	return nil
}
