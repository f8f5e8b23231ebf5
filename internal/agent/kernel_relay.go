package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/agent/protocol"
	"github.com/cubicle-sandbox/cubicle/internal/kernel"
)

// Kernel relay (the Kernel Gateway API's kernels): KindKernelOpen starts an
// ipykernel of the relay's own (not the Python calls' session kernel; at
// most one relay per computer) and answers KindOK {"closed":false} once
// kernel_info was answered and iopub is subscribed. From then on:
//
//   - kernel → host: every message the kernel sends, on any channel, as
//     KindKernelMessage (chunked, kernel_wire.go), in order per channel.
//   - host → kernel: KindKernelMessage (shell, control or stdin; checked,
//     then signed with the kernel's key); KindKernelControl "interrupt"
//     (SIGINT, at once) and "restart" (a fresh kernel, same env and cwd; in
//     order with the messages), each answered by KindKernelControlReply.
//   - KindKernelClose, or the host going away, shuts the kernel down.
//
// The relay's last frame is KindOK {"closed":true} after a close, or
// KindError (ErrKernelDead when the kernel cannot go on). The kernel's
// processes are gone before it is sent.
//
// Kernel death, like jupyter_server's autorestarter: a kernel that dies
// without the agent killing it (crash, os._exit, the OOM killer) makes the
// relay send an iopub status "restarting" and start a new kernel. A crash
// within 10 s of the previous one counts toward RestartLimit (default 5);
// past it, or when a new kernel cannot start, the relay sends status
// "dead" and ends. Restarts on request do not count, and reset the count;
// an exit after the client's own shutdown_request is restarted the same
// way but is not a crash either.
// A kernel that breaks the wire protocol is stopped: status "dead", end.
//
// Slow host: the kernel's sockets are always drained (the kernel client's
// readers only queue). What the host has not taken yet is held up to
// maxRelayBacklog bytes; past that the relay ends with an error rather
// than dropping messages silently. Likewise, host messages the kernel has
// not taken are held up to maxRelayInbox bytes.

const (
	maxRelayBacklog     = 2 * protocol.MaxKernelMessage
	maxRelayInbox       = 2 * protocol.MaxKernelMessage
	defaultRestartLimit = 5
	// stableStart: a kernel that ran this long before dying starts a new
	// run of crashes (jupyter_client's stable_start_time).
	stableStart = 10 * time.Second
	// shutdownWait is how long a kernel that closed its sockets after a
	// client's shutdown_request has to exit (a clean Python exit under load
	// takes a while) before it is killed: jupyter_client's
	// shutdown_wait_time.
	shutdownWait = 5 * time.Second
	// queuedOverhead is what a queued item costs beyond its bytes, so that
	// many empty items are bounded too.
	queuedOverhead = 256
)

// KernelRelayState is the payload of a relay's KindOK frames: the first
// answers the open; the last ends the relay after a close.
type KernelRelayState struct {
	Closed bool `json:"closed"`
}

var (
	errRelayClosed = errors.New("kernel relay closed")
	errBacklog     = fmt.Errorf("%w: the host did not take the kernel's messages fast enough (more than %d MiB waiting); the relay was closed", protocol.ErrKernelBacklog, maxRelayBacklog>>20)
)

type kernelRelay struct {
	s       *Server
	id      uint32
	spec    kernelSpec
	limit   int    // crashes in a row that are restarted
	session string // Jupyter session of the status messages the relay makes
	ctx     context.Context
	cancel  context.CancelCauseFunc

	inbox *boundedQueue[protocol.Frame]         // from the host, for the worker
	out   *boundedQueue[protocol.KernelMessage] // from the kernel, for the sender

	// Worker only.
	asm       assembler
	crashes   int
	lastDeath time.Time
	shutdown  bool // the client sent the current kernel a shutdown_request

	k *pyKernel // current kernel; under s.mu
}

// openRelay starts a relay on stream id (KindKernelOpen).
func (s *Server) openRelay(ctx context.Context, id uint32, req protocol.KernelStart) {
	if req.Cwd == "" {
		req.Cwd = WorkspacePath
	}
	cwd, err := s.resolveCwd(req.Cwd)
	if err != nil {
		s.sendError(id, err)
		return
	}
	if req.RestartLimit <= 0 {
		req.RestartLimit = defaultRestartLimit
	}
	var rnd [16]byte
	_, _ = rand.Read(rnd[:])
	r := &kernelRelay{
		s: s, id: id, limit: req.RestartLimit, session: hex.EncodeToString(rnd[:]),
		inbox: newBoundedQueue[protocol.Frame](maxRelayInbox),
		out:   newBoundedQueue[protocol.KernelMessage](maxRelayBacklog),
		asm:   assembler{limit: protocol.MaxKernelMessage + 64<<10},
	}
	r.spec = kernelSpec{cwd: cwd, env: req.Env, opts: kernel.Options{
		MaxFrameBytes:   protocol.MaxKernelMessage,
		MaxMessageBytes: protocol.MaxKernelMessage,
		OnMessage:       r.fromKernel,
	}}
	r.ctx, r.cancel = context.WithCancelCause(ctx)
	s.mu.Lock()
	busy := s.relay != nil
	if !busy {
		s.relay = r
	}
	s.mu.Unlock()
	if busy {
		r.cancel(nil)
		s.sendError(id, fmt.Errorf("%w: a kernel relay is already open in this computer (one at a time)", protocol.ErrBusy))
		return
	}
	go r.run()
}

// relayInput routes a host frame to the relay of its stream. Frames for a
// relay that has just ended are dropped.
func (s *Server) relayInput(f protocol.Frame) {
	s.mu.Lock()
	r := s.relay
	s.mu.Unlock()
	if r == nil || r.id != f.ID {
		return
	}
	switch f.Kind {
	case protocol.KindKernelClose:
		r.cancel(errRelayClosed)
	case protocol.KindKernelControl:
		var c protocol.KernelControl
		if err := json.Unmarshal(f.Payload, &c); err != nil {
			r.reply(c.Seq, fmt.Errorf("%w: %v", protocol.ErrInvalid, err))
			return
		}
		switch c.Action {
		case "interrupt": // at once, not behind queued messages
			if k := r.current(); k != nil {
				k.interrupt()
			}
			r.reply(c.Seq, nil)
			return
		case "restart":
		default:
			r.reply(c.Seq, fmt.Errorf("%w: kernel control %q (want \"interrupt\" or \"restart\")", protocol.ErrInvalid, clipString(c.Action, 40)))
			return
		}
		fallthrough
	default:
		if !r.inbox.push(f, int64(len(f.Payload))+queuedOverhead) {
			r.cancel(fmt.Errorf("%w: the host sent more than %d MiB the kernel has not taken", protocol.ErrInvalid, maxRelayInbox>>20))
		}
	}
}

func (r *kernelRelay) current() *pyKernel {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	return r.k
}

func (r *kernelRelay) setKernel(k *pyKernel) {
	r.s.mu.Lock()
	r.k = k
	r.s.mu.Unlock()
}

func (r *kernelRelay) reply(seq uint64, err error) {
	rep := protocol.KernelControlReply{Seq: seq}
	if err != nil {
		w := protocol.ToWire(err)
		rep.Error = &w
	}
	r.s.sendJSON(protocol.KindKernelControlReply, r.id, rep)
}

// fromKernel queues a kernel's message for the host (called by the kernel
// client's readers: it never blocks).
func (r *kernelRelay) fromKernel(m kernel.RawMessage) {
	r.push(fromRaw(m))
}

func (r *kernelRelay) push(m protocol.KernelMessage) {
	if !r.out.push(m, messageSize(&m)+queuedOverhead) {
		r.cancel(errBacklog)
	}
}

// run is the relay's worker: it owns the kernel's lifecycle and feeds it
// the host's messages.
func (r *kernelRelay) run() {
	var sender chan struct{}
	err := func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				r.s.log.Error("kernel relay panicked", "panic", p, "stack", string(debug.Stack()))
				err = fmt.Errorf("%w: kernel relay: %v", protocol.ErrInternal, p)
			}
		}()
		return r.serve(&sender)
	}()
	r.finish(err, sender)
}

func (r *kernelRelay) serve(sender *chan struct{}) error {
	k, err := r.startKernel()
	if err != nil {
		return err
	}
	r.setKernel(k)
	if err := r.s.sendJSON(protocol.KindOK, r.id, KernelRelayState{}); err != nil {
		return err
	}
	done := make(chan struct{})
	*sender = done
	go r.sendLoop(done)
	for {
		k := r.current()
		select {
		case <-r.ctx.Done():
			return context.Cause(r.ctx)
		case <-r.inbox.ready:
			if err := r.drainInbox(); err != nil {
				return err
			}
		case <-k.client.Done():
			if err := r.kernelEnded(k); err != nil {
				return err
			}
		case <-k.exited:
			if err := r.kernelEnded(k); err != nil {
				return err
			}
		}
	}
}

// startKernel starts a kernel with the relay's spec.
func (r *kernelRelay) startKernel() (*pyKernel, error) {
	k, err := r.s.startKernel(r.ctx, r.spec)
	if err != nil {
		var se *kernelStartError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("%w: the kernel could not start: %s", protocol.ErrKernelDead, se.msg)
		}
		if r.ctx.Err() != nil {
			return nil, context.Cause(r.ctx)
		}
		return nil, err
	}
	return k, nil
}

// drainInbox hands the host's queued frames to the kernel.
func (r *kernelRelay) drainInbox() error {
	for {
		f, ok, _ := r.inbox.pop()
		if !ok || r.ctx.Err() != nil {
			return nil
		}
		if f.Kind == protocol.KindKernelControl { // a restart (relayInput answered the rest)
			var c protocol.KernelControl
			_ = json.Unmarshal(f.Payload, &c)
			err := r.restart()
			r.reply(c.Seq, err)
			if err != nil {
				return err
			}
			continue
		}
		m, err := r.asm.add(f.Payload)
		if err != nil {
			return fmt.Errorf("%w: %v", protocol.ErrInvalid, err)
		}
		if m == nil {
			continue // more chunks to come
		}
		if err := ValidateKernelMessage(m); err != nil {
			return err
		}
		if m.Channel == protocol.ChannelIOPub {
			return fmt.Errorf("%w: a client cannot send on iopub", protocol.ErrInvalid)
		}
		if m.Channel == protocol.ChannelControl && headerType(m.Header) == "shutdown_request" {
			r.shutdown = true
		}
		if err := r.current().client.SendRaw(*toRaw(m)); errors.Is(err, kernel.ErrInvalidMessage) {
			return fmt.Errorf("%w: %v", protocol.ErrInvalid, err)
		}
		// Any other error is the kernel's end, which the worker sees next:
		// the message is lost with the kernel, as with jupyter_server.
	}
}

// restart replaces the kernel at the host's request.
func (r *kernelRelay) restart() error {
	r.current().stop(killRestart)
	k, err := r.startKernel()
	if err != nil {
		r.push(statusMessage(r.session, "dead"))
		return err
	}
	r.setKernel(k)
	r.crashes, r.shutdown = 0, false
	return nil
}

// kernelEnded handles a kernel whose connection or process ended: a crash
// is restarted (until the limit), anything else ends the relay.
func (r *kernelRelay) kernelEnded(k *pyKernel) error {
	if err := k.client.Err(); errors.Is(err, kernel.ErrProtocol) {
		k.stop(killProtocol)
		r.push(statusMessage(r.session, "dead"))
		return fmt.Errorf("%w: the kernel broke the wire protocol and was stopped: %v", protocol.ErrKernelDead, err)
	}
	wait := time.Second
	if r.shutdown {
		wait = shutdownWait
	}
	switch {
	case k.waitExit(wait):
	case r.shutdown:
		k.stop(killStop) // asked to exit and slow about it, as jupyter_client's shutdown_wait_time
	default:
		// The connection ended but the process lives: it closed its own
		// sockets. Its session is unusable.
		k.stop(killProtocol)
		r.push(statusMessage(r.session, "dead"))
		return fmt.Errorf("%w: the kernel's connection failed (%v), so it was stopped", protocol.ErrKernelDead, k.client.Err())
	}
	<-k.cleaned
	now := time.Now()
	switch {
	case r.shutdown:
		// It exited because the client asked (shutdown_request over the
		// channel rather than the API): restarted like jupyter_server's
		// restarter does, but not a crash.
	case now.Sub(r.lastDeath) < stableStart:
		r.crashes++
		r.lastDeath = now
	default:
		r.crashes = 1
		r.lastDeath = now
	}
	r.shutdown = false
	if r.crashes > r.limit {
		r.push(statusMessage(r.session, "dead"))
		return fmt.Errorf("%w: the kernel died %d times in a row, the last time %s", protocol.ErrKernelDead, r.crashes, k.death())
	}
	r.s.log.Info("relayed kernel died; restarting", "death", k.death(), "crashes", r.crashes)
	r.push(statusMessage(r.session, "restarting"))
	nk, err := r.startKernel()
	if err != nil {
		r.push(statusMessage(r.session, "dead"))
		return err
	}
	r.setKernel(nk)
	return nil
}

// headerType is a header's msg_type ("" when it has none).
func headerType(h json.RawMessage) string {
	var v struct {
		MsgType string `json:"msg_type"`
	}
	_ = json.Unmarshal(h, &v)
	return v.MsgType
}

// sendLoop sends the kernel's messages to the host until the outbox is
// closed and empty.
func (r *kernelRelay) sendLoop(done chan struct{}) {
	defer close(done)
	defer func() {
		if p := recover(); p != nil {
			r.s.log.Error("kernel relay sender panicked", "panic", p, "stack", string(debug.Stack()))
			r.cancel(fmt.Errorf("%w: kernel relay sender: %v", protocol.ErrInternal, p))
			r.out.close(true)
		}
	}()
	for {
		m, ok, end := r.out.pop()
		switch {
		case end:
			return
		case !ok:
			<-r.out.ready
			continue
		}
		chunks, err := encodeKernelMessage(&m)
		if err != nil {
			r.cancel(fmt.Errorf("%w: %v", protocol.ErrInternal, err))
			continue
		}
		for _, c := range chunks {
			if err := r.s.send(protocol.KindKernelMessage, r.id, c); err != nil {
				r.cancel(err) // the control channel is gone
				r.out.close(true)
				return
			}
		}
	}
}

// finish ends the relay: the kernel is stopped, what the kernel sent is
// delivered (unless the host fell behind), then the last frame goes out.
func (r *kernelRelay) finish(err error, sender chan struct{}) {
	r.cancel(err)
	if k := r.current(); k != nil {
		k.stop(killStop)
	}
	r.out.close(errors.Is(err, errBacklog) || sender == nil)
	if sender != nil {
		<-sender
	}
	r.s.mu.Lock()
	if r.s.relay == r {
		r.s.relay = nil
	}
	r.s.mu.Unlock()
	if err == nil || errors.Is(err, errRelayClosed) {
		r.s.sendJSON(protocol.KindOK, r.id, KernelRelayState{Closed: true})
		return
	}
	r.s.sendError(r.id, err)
}
