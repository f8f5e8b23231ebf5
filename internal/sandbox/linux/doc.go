// Package linux implements sandbox.Driver with Linux namespaces, cgroups
// (v1, hybrid and v2, through github.com/opencontainers/cgroups), a bounded
// ext4 disk per computer, and a seccomp filter derived from Docker's default
// profile.
//
// The host side (Driver, computer) prepares cgroups, the disk and the
// mounts only it can make (hostmounts.go, neutral.go), then has the
// launcher, a long-lived process of the agent executable that forks the
// agents so that this process never forks without vfork (launcher.go,
// launchermain.go), start the agent (the lean cmd/cubicle-agent the
// binary carries, agentexe.go and agentbin, or the cubicle binary
// itself) in new user, PID, mount,
// network, IPC, UTS and cgroup namespaces; the user namespace maps the
// sandbox user to the computer's own host uid (uids.go). The child side
// (AgentMain) builds the computer's root filesystem as PID 1 (rootfs.go),
// pivots into it, drops privileges, loads seccomp and hands over to
// internal/agent's server. Extra mounts are resolved on the host and
// passed as descriptors (mounts.go). Teardown is split:
// Kill returns once no task of the computer can run code (kill.go), Destroy
// then waits for the kernel to finish and frees the resources.
//
// It may import internal/sandbox, internal/agent and internal/agent/protocol (the
// Init and Ready frames it builds the computer with), its own subpackages
// (seccomp, disk, agentbin), x/sys and opencontainers/cgroups.
package linux
