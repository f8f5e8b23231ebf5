package sandbox

import "context"

// MaxKernelMessage bounds one relayed Jupyter message (JSON parts and
// buffers); Send refuses a larger one with ErrInvalid (the relay goes on).
const MaxKernelMessage = 32 << 20

// Kernel relays Jupyter messages between a client and a kernel of its own
// inside a computer (the Kernel Gateway API).
type Kernel interface {
	// Send delivers a client message to the kernel on m.Channel (shell,
	// control or stdin; stdin travels with shell's identity).
	Send(ctx context.Context, m KernelMessage) error
	// Messages delivers, in order, everything the kernel sends (iopub,
	// shell, stdin, control) and the status messages made for the client
	// when the kernel dies or restarts ("restarting", "dead"). It is closed
	// when the relay ends; Err then says why.
	Messages() <-chan KernelMessage
	// Interrupt sends SIGINT to the kernel.
	Interrupt(ctx context.Context) error
	// Restart replaces the kernel with a fresh one (same env and cwd).
	Restart(ctx context.Context) error
	// Close shuts the kernel down and ends the relay.
	Close(ctx context.Context) error
	// Err is why the relay ended, or nil while it runs.
	Err() error
}
