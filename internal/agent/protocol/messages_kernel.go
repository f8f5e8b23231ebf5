package protocol

import "encoding/json"

// Kernel relay frames (Jupyter Kernel Gateway mode). A relay is KindKernelOpen
// (JSON KernelStart) on a new stream: the agent starts a kernel of its own
// (not the session kernel of Python calls) and answers KindOK once it is
// ready, then sends every message the kernel sends as KindKernelMessage on
// that stream, until the relay ends with KindOK (closed) or KindError. On the
// same stream the host sends KindKernelMessage (a client's shell, control or
// stdin message) and KindKernelControl (JSON KernelControl). Cancelling the
// stream shuts the kernel down.
const (
	KindKernelOpen    Kind = iota + 48 // JSON KernelStart
	KindKernelControl                  // JSON KernelControl
	KindKernelMessage Kind = iota + 112
)

// Jupyter channels a relayed message travels on.
const (
	ChannelShell   = "shell"
	ChannelControl = "control"
	ChannelStdin   = "stdin"
	ChannelIOPub   = "iopub"
)

// More relay frames (kernel_relay.go has the whole protocol):
// KindKernelClose (host, empty) ends the relay: the agent shuts the kernel
// down and answers KindOK as the stream's last frame. KindKernelControlReply
// (agent, JSON KernelControlReply) answers each KindKernelControl.
const (
	KindKernelClose        Kind = 50
	KindKernelControlReply Kind = 115
)

// MaxKernelMessage bounds one relayed Jupyter message: its four JSON parts
// and its buffers. Both sides refuse a larger one.
const MaxKernelMessage = 32 << 20

// KernelStart starts a relayed kernel.
type KernelStart struct {
	Env []string `json:"env,omitempty"` // NAME=value, already filtered by the host
	Cwd string   `json:"cwd,omitempty"` // default /workspace
	// RestartLimit is how many crashes in a row (each within 10 s of the
	// previous restart) are followed by an automatic restart; the next one
	// ends the relay with status "dead". 0 means 5, jupyter_client's
	// restart_limit.
	RestartLimit int `json:"restart_limit,omitempty"`
}

// KernelControl acts on a relayed kernel: "interrupt" or "restart".
type KernelControl struct {
	Action string `json:"action"`
	Seq    uint64 `json:"seq,omitempty"` // echoed in the reply
}

// KernelControlReply answers a KernelControl; Error is set when it failed.
type KernelControlReply struct {
	Seq   uint64     `json:"seq"`
	Error *WireError `json:"error,omitempty"`
}

// KernelMessage is one Jupyter message, as the Kernel Gateway's WebSocket
// carries it: the four JSON parts unchanged (the agent signs what it sends
// and checks sizes, never trusts what the kernel sends), binary buffers and
// the channel.
type KernelMessage struct {
	Channel      string          `json:"channel"`
	Header       json.RawMessage `json:"header"`
	ParentHeader json.RawMessage `json:"parent_header"`
	Metadata     json.RawMessage `json:"metadata"`
	Content      json.RawMessage `json:"content"`
	Buffers      [][]byte        `json:"buffers,omitempty"`
}
