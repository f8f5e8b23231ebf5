// Package agent is the in-computer side of Cubicle and its host-side client.
//
// The agent runs as PID 1 inside a computer (after internal/sandbox/linux has
// built its namespaces, mounts and privileges). It starts and reaps every
// process there, streams their output, and performs file operations with the
// sandbox user's privileges, confined to /workspace. The host talks to it over
// a framed control channel (a socketpair inherited as a file descriptor, with no
// path inside the computer). Every frame is bounded in both directions.
//
// It also runs Python: a session kernel per computer (or one per call),
// started as the sandbox user and driven with internal/kernel, with calls
// queued in order, crash and timeout policies, and every output fitted into
// one bounded frame: python.go (calls: validation, cells, per_call kernels),
// python_session.go (the session kernel and its crash, idle and restart
// policies), python_turnstile.go (the in-order queue), python_launch.go
// (starting a kernel, with python_launcher.py), python_prelude.go (the lazy
// prelude, with python_lazy.py), python_kernel.go (a running kernel:
// process, kill, cells), python_output.go (outputs fitted into frames).
//
// It moves directories as tar archives, extracted and written as the
// sandbox user through no symlink (tar_write.go, tar_read.go;
// client_tar.go on the host), and renames files (move.go).
//
// It holds background processes that outlive the host's requests, each
// with a bounded ring of its newest output and a stdin pipe
// (process_bg.go, proc_ring.go; client_proc.go on the host).
//
// And it relays a Jupyter kernel of its own to the host for the Kernel
// Gateway API: every message in both directions, chunked over the control
// channel, with crash restarts and bounded queues on both sides
// (kernel_relay.go on the agent, client_kernel.go on the host,
// kernel_wire.go for the chunk format).
//
// A computer's start is the host's Handshake (handshake.go: Init, then the
// agent's Ready or its setup error) over any Conn with deadlines: the Linux
// driver's socketpair, or the TLS connection to a pod's agent
// (internal/sandbox/kube); the agent then serves the same protocol on it.
//
// The control channel's protocol (frames, messages, error codes) is
// internal/agent/protocol, platform-free; this package speaks it on both
// ends. The host-side client (client*.go) is where protocol values become
// internal/sandbox's types and error kinds and back (client_convert.go), so
// its callers (internal/sandbox/linux) never see a wire type.
//
// It may import the standard library, golang.org/x/sys,
// internal/agent/protocol, internal/sandbox and internal/kernel.
package agent
