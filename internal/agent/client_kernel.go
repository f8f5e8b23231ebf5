package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// maxHostBacklog bounds the frames of one relay that the host has received
// but its consumer has not taken (Messages). Past it the relay ends with
// sandbox.ErrKernelBacklog: the read loop, shared by every stream of the computer,
// never waits for a relay's consumer.
const maxHostBacklog = 2 * protocol.MaxKernelMessage

// finalTimeout bounds the wait for the agent's last frame of a relay that
// ended on the host's side (the agent stops a kernel in well under it).
const finalTimeout = 30 * time.Second

// errKernelBacklog ends a relay whose consumer did not read Messages fast
// enough (more than maxHostBacklog bytes waiting).
var errKernelBacklog = protocol.WithMessage(sandbox.ErrKernelBacklog, fmt.Sprintf(
	"the client did not read the kernel's messages fast enough (more than %d MiB waiting); the relay was closed", maxHostBacklog>>20))

// KernelRelay is the host's end of a kernel relay (kernel_relay.go has the
// protocol). It implements sandbox.Kernel; its methods are safe for
// concurrent use.
type KernelRelay struct {
	c     *Client
	id    uint32
	queue *boundedQueue[protocol.Frame] // from the read loop, for the pump
	msgs  chan sandbox.KernelMessage

	sendMu sync.Mutex // one message's chunks at a time

	ctlMu    sync.Mutex // one control at a time
	ctlSeq   uint64
	ctlWant  atomic.Uint64
	ctlReply chan protocol.KernelControlReply

	stopOnce sync.Once
	stop     chan struct{} // closed by fail: the pump stops
	err      error         // set before stop is closed
	ended    chan struct{} // closed when Messages is closed

	finalOnce sync.Once
	final     chan struct{} // the agent's last frame arrived: its kernel is gone
}

// OpenKernel starts a kernel of the relay's own in the computer and
// returns once it answers. Cancelling ctx during the start stops it.
func (c *Client) OpenKernel(ctx context.Context, start sandbox.KernelStart) (*KernelRelay, error) {
	b, err := json.Marshal(protocol.KernelStart(start))
	if err != nil || len(b) > protocol.MaxPayload {
		return nil, fmt.Errorf("%w: kernel start of %d bytes (limit %d): %v", sandbox.ErrInvalid, len(b), protocol.MaxPayload, err)
	}
	r := &KernelRelay{
		c:        c,
		queue:    newBoundedQueue[protocol.Frame](maxHostBacklog),
		msgs:     make(chan sandbox.KernelMessage), // unbuffered: the queue alone holds the backlog, bounded in bytes
		ctlReply: make(chan protocol.KernelControlReply, 1),
		stop:     make(chan struct{}),
		ended:    make(chan struct{}),
		final:    make(chan struct{}),
	}
	r.id = c.register(&stream{gone: make(chan struct{}), deliver: r.deliver})
	if err := c.send(protocol.KindKernelOpen, r.id, b); err != nil {
		c.release(r.id)
		return nil, err
	}
	done, cancelled := ctx.Done(), false
	for {
		f, ok, _ := r.queue.pop()
		if !ok {
			select {
			case <-r.queue.ready:
			case <-c.done:
				if f, ok, _ = r.queue.pop(); !ok {
					c.release(r.id)
					return nil, c.gone()
				}
			case <-done:
				done, cancelled = nil, true
				c.send(protocol.KindKernelClose, r.id, nil)
			}
			if !ok {
				continue
			}
		}
		switch f.Kind {
		case protocol.KindOK:
			var st KernelRelayState
			if err := json.Unmarshal(f.Payload, &st); err != nil {
				return nil, r.abandon(fmt.Errorf("%w: malformed kernel relay answer: %v", protocol.ErrInternal, err))
			}
			if st.Closed {
				c.release(r.id)
				return nil, r.openErr(ctx, cancelled, sandbox.ErrKernelClosed)
			}
			if !cancelled {
				go r.pump()
				return r, nil
			}
			// Opened after all: wait for the close we sent.
		case protocol.KindError:
			c.release(r.id)
			return nil, r.openErr(ctx, cancelled, decodeReply(f, nil))
		case protocol.KindKernelMessage:
			if !cancelled {
				return nil, r.abandon(fmt.Errorf("%w: kernel message before the relay was open", protocol.ErrInternal))
			}
		default:
			return nil, r.abandon(fmt.Errorf("%w: unexpected frame kind %d in a kernel relay", protocol.ErrInternal, f.Kind))
		}
	}
}

func (r *KernelRelay) openErr(ctx context.Context, cancelled bool, err error) error {
	if cancelled {
		return context.Cause(ctx)
	}
	return err
}

// abandon gives up on a relay whose agent broke the protocol while opening.
func (r *KernelRelay) abandon(err error) error {
	r.c.send(protocol.KindKernelClose, r.id, nil)
	r.c.release(r.id)
	return err
}

// deliver takes a frame from the read loop. It never blocks: frames queue
// up to maxHostBacklog, then the relay ends with sandbox.ErrKernelBacklog.
func (r *KernelRelay) deliver(f protocol.Frame) {
	switch f.Kind {
	case protocol.KindKernelControlReply: // answered here: a slow consumer must not delay controls
		var rep protocol.KernelControlReply
		if json.Unmarshal(f.Payload, &rep) == nil && rep.Seq != 0 && rep.Seq == r.ctlWant.Load() {
			select {
			case r.ctlReply <- rep:
			default:
			}
		}
		return
	}
	if !r.stopped() && !r.queue.push(f, int64(len(f.Payload))+queuedOverhead) && !r.stopped() {
		r.fail(errKernelBacklog)
		go r.c.send(protocol.KindKernelClose, r.id, nil) // not from the read loop
	}
	if isFinal(f) {
		r.finalOnce.Do(func() { close(r.final) })
		r.c.release(r.id)
	}
}

// isFinal reports a relay's last frame: an error, or the close's KindOK.
func isFinal(f protocol.Frame) bool {
	if f.Kind == protocol.KindError {
		return true
	}
	var st KernelRelayState
	return f.Kind == protocol.KindOK && json.Unmarshal(f.Payload, &st) == nil && st.Closed
}

func (r *KernelRelay) stopped() bool {
	select {
	case <-r.stop:
		return true
	default:
		return false
	}
}

// fail ends the relay for the consumer; the first reason sticks.
func (r *KernelRelay) fail(err error) {
	r.stopOnce.Do(func() {
		r.err = err
		close(r.stop)
	})
}

// pump turns queued frames into Messages, in order, until the relay ends.
func (r *KernelRelay) pump() {
	defer func() {
		r.queue.close(true)
		// Messages closes once the agent has confirmed the end (its kernel
		// is gone), so the caller may open the next relay right away.
		t := time.NewTimer(finalTimeout)
		defer t.Stop()
		select {
		case <-r.final:
		case <-r.c.done:
		case <-t.C:
		}
		close(r.ended) // first: Err is set when a reader sees Messages closed
		close(r.msgs)
	}()
	asm := assembler{limit: protocol.MaxKernelMessage + 64<<10}
	bad := func(err error) {
		r.fail(fmt.Errorf("%w: kernel relay: %v", protocol.ErrInternal, err))
		r.c.send(protocol.KindKernelClose, r.id, nil)
	}
	gone := false
	for {
		f, ok, _ := r.queue.pop()
		if !ok {
			if gone {
				r.fail(r.c.gone())
				return
			}
			select {
			case <-r.queue.ready:
			case <-r.stop:
				return
			case <-r.c.done:
				gone = true // deliver what arrived before
			}
			continue
		}
		switch f.Kind {
		case protocol.KindKernelMessage:
			m, err := asm.add(f.Payload)
			if err == nil && m != nil {
				err = ValidateKernelMessage(m)
			}
			if err != nil {
				bad(err)
				return
			}
			if m == nil {
				continue
			}
			select {
			case r.msgs <- sandbox.KernelMessage(*m):
			case <-r.stop:
				return
			}
		case protocol.KindOK:
			if isFinal(f) {
				r.fail(sandbox.ErrKernelClosed)
				return
			}
			bad(errors.New("a second open answer"))
			return
		case protocol.KindError:
			r.fail(decodeReply(f, nil))
			return
		default:
			bad(fmt.Errorf("unexpected frame kind %d", f.Kind))
			return
		}
	}
}

// Send delivers a client message to the kernel on m.Channel (shell,
// control or stdin). A message that is not a valid Jupyter message, or is
// over MaxKernelMessage, is refused with ErrInvalid and the relay goes on.
func (r *KernelRelay) Send(ctx context.Context, sm sandbox.KernelMessage) error {
	m := protocol.KernelMessage(sm)
	if err := ValidateKernelMessage(&m); err != nil {
		return hostError(err)
	}
	if m.Channel == protocol.ChannelIOPub {
		return fmt.Errorf("%w: a client cannot send on iopub", sandbox.ErrInvalid)
	}
	chunks, err := encodeKernelMessage(&m)
	if err != nil {
		return hostError(err)
	}
	r.sendMu.Lock()
	defer r.sendMu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.stopped() {
		return r.err
	}
	// Once started, a message's chunks all go: a partial one would corrupt
	// the stream.
	for _, c := range chunks {
		if err := r.c.send(protocol.KindKernelMessage, r.id, c); err != nil {
			return err
		}
	}
	return nil
}

// Messages delivers everything the kernel sends, in order per channel,
// plus the relay's status messages ("restarting", "dead"). It is closed
// when the relay has ended and the agent has confirmed that its kernel is
// gone; Err then says why.
func (r *KernelRelay) Messages() <-chan sandbox.KernelMessage { return r.msgs }

// Err is why the relay ended (sandbox.ErrKernelClosed after Close,
// sandbox.ErrKernelBacklog, ErrKernelDead, sandbox.ErrGone...), or nil while it runs.
func (r *KernelRelay) Err() error {
	select {
	case <-r.ended:
		return r.err
	default:
		return nil
	}
}

// Interrupt sends SIGINT to the kernel.
func (r *KernelRelay) Interrupt(ctx context.Context) error { return r.control(ctx, "interrupt") }

// Restart replaces the kernel with a fresh one (same env and cwd) and
// returns once it answers. If no kernel can start, the relay ends.
func (r *KernelRelay) Restart(ctx context.Context) error { return r.control(ctx, "restart") }

func (r *KernelRelay) control(ctx context.Context, action string) error {
	r.ctlMu.Lock()
	defer r.ctlMu.Unlock()
	if r.stopped() {
		return r.err
	}
	r.ctlSeq++
	seq := r.ctlSeq
	select { // a reply to an abandoned control
	case <-r.ctlReply:
	default:
	}
	r.ctlWant.Store(seq)
	defer r.ctlWant.Store(0)
	if err := r.c.sendJSON(protocol.KindKernelControl, r.id, protocol.KernelControl{Action: action, Seq: seq}); err != nil {
		return err
	}
	select {
	case rep := <-r.ctlReply:
		if rep.Error != nil {
			return fromWire(*rep.Error)
		}
		return nil
	case <-r.stop:
		return r.err
	case <-r.final: // the relay ended; its reply may have come first
		select {
		case rep := <-r.ctlReply:
			if rep.Error != nil {
				return fromWire(*rep.Error)
			}
			return nil
		default:
			return fmt.Errorf("%w: the relay ended before the kernel %s was done", sandbox.ErrKernelClosed, action)
		}
	case <-r.c.done:
		return r.c.gone()
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Close shuts the kernel down and ends the relay. It returns once the
// agent confirmed that the kernel's processes are gone (or ctx ended).
func (r *KernelRelay) Close(ctx context.Context) error {
	r.fail(sandbox.ErrKernelClosed)
	select {
	case <-r.final:
		return nil
	default:
	}
	if err := r.c.send(protocol.KindKernelClose, r.id, nil); err != nil {
		return nil // the computer is gone, and its kernel with it
	}
	select {
	case <-r.final:
	case <-r.c.done:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	return nil
}
