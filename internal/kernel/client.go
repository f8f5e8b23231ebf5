package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Options tunes a Client. Zero fields take the defaults shown.
type Options struct {
	MaxFrameBytes    int64         // one ZMTP frame; default 64 MiB
	MaxMessageFrames int           // frames in one message; default 1024
	MaxMessageBytes  int64         // all frames of one message; default 64 MiB
	MaxOutputBytes   int64         // per cell (Result.Outputs); default 4 MiB
	MaxImageBytes    int64         // one decoded PNG; default 16 MiB
	StallTimeout     time.Duration // a message, once started, must progress; also bounds each handshake; default 10 s
	WriteTimeout     time.Duration // the kernel must accept what we send; default 10 s
	Grace            time.Duration // completion with only one of execute_reply / idle (after a barrier when idle is missing: execute.go); default 2 s
	Username         string        // header username; default "cubicle"
	// OnMessage, when set, puts the Client in raw mode (raw.go): every
	// message the kernel sends, except replies to the Client's own
	// requests, is passed to it, validated but unchanged. It is called from
	// the socket reader goroutines (one per channel, so messages of one
	// channel arrive in order, channels concurrently) and must not block:
	// a reader that lags makes the kernel's PUB socket drop iopub messages.
	OnMessage func(RawMessage)
}

func (o Options) withDefaults() Options {
	def := func(v *int64, d int64) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.MaxFrameBytes, 64<<20)
	def(&o.MaxMessageBytes, 64<<20)
	def(&o.MaxOutputBytes, 4<<20)
	def(&o.MaxImageBytes, 16<<20)
	if o.MaxMessageFrames <= 0 {
		o.MaxMessageFrames = 1024
	}
	dur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	dur(&o.StallTimeout, 10*time.Second)
	dur(&o.WriteTimeout, 10*time.Second)
	dur(&o.Grace, 2*time.Second)
	if o.Username == "" {
		o.Username = "cubicle"
	}
	return o
}

// ErrClosed is returned by operations on a closed Client.
var ErrClosed = errors.New("kernel: client closed")

// ErrDisconnected reports that a connection to the kernel ended (the kernel
// exited or closed the socket). The Client is unusable.
var ErrDisconnected = errors.New("kernel: connection lost")

// KernelInfo is what the kernel said about itself in kernel_info_reply.
type KernelInfo struct {
	ProtocolVersion       string `json:"protocol_version"`
	Implementation        string `json:"implementation"`
	ImplementationVersion string `json:"implementation_version"`
	LanguageInfo          struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"language_info"`
	Banner string `json:"banner"`
}

// Stats counts what the client received and did not use.
type Stats struct {
	Messages      uint64 // messages parsed and authenticated
	BadSignatures uint64 // dropped: signature missing or wrong
	Malformed     uint64 // dropped: not a Jupyter message, or content of the wrong shape
	Unmatched     uint64 // ignored: not in reply to anything in flight
	Late          uint64 // dropped: output for a cell that had already completed
	InputRequests uint64 // input_request answered with end-of-file
}

// Client is a connection to one Jupyter kernel: shell, iopub, stdin and
// control sockets (no heartbeat; liveness comes from the kernel process).
// Its methods are safe for concurrent use.
type Client struct {
	opts     Options
	sign     *signer
	identity []byte
	idPrefix string
	seq      atomic.Uint64

	shell, iopub, stdin, control *zconn

	mu        sync.Mutex
	pending   map[string]*execution
	waiters   map[string]chan *Message // shell/control replies by parent msg_id
	recent    [64]string               // recently completed executions, for Late
	recentN   int
	abandoned []*execution
	kinfoIDs  map[string]bool
	iopubUp   chan struct{} // closed when iopub delivered a status for a kernel_info_request
	iopubOK   bool

	info KernelInfo

	stats struct {
		messages, badSig, malformed, unmatched, late, input atomic.Uint64
	}

	done    chan struct{}
	errOnce sync.Once
	err     error
	wg      sync.WaitGroup
}

// Info returns the kernel's kernel_info_reply.
func (c *Client) Info() KernelInfo { return c.info }

// Stats returns the counters of dropped and ignored messages.
func (c *Client) Stats() Stats {
	return Stats{
		Messages:      c.stats.messages.Load(),
		BadSignatures: c.stats.badSig.Load(),
		Malformed:     c.stats.malformed.Load(),
		Unmatched:     c.stats.unmatched.Load(),
		Late:          c.stats.late.Load(),
		InputRequests: c.stats.input.Load(),
	}
}

// Err returns why the client stopped working (a *ProtocolError when the
// kernel broke the protocol, ErrClosed after Close), or nil.
func (c *Client) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// Done is closed when the client stops working; Err says why.
func (c *Client) Done() <-chan struct{} { return c.done }

// fail records the first error and closes every connection; the readers
// then end.
func (c *Client) fail(err error) {
	c.errOnce.Do(func() {
		c.err = err
		close(c.done)
		for _, z := range []*zconn{c.iopub, c.shell, c.stdin, c.control} {
			if z != nil {
				z.close()
			}
		}
	})
}

// Close closes the connections and waits for the reader goroutines. It does
// not stop the kernel.
func (c *Client) Close() error {
	c.fail(ErrClosed)
	c.wg.Wait()
	c.mu.Lock()
	pend := make([]*execution, 0, len(c.pending))
	for _, e := range c.pending {
		pend = append(pend, e)
	}
	c.mu.Unlock()
	for _, e := range pend {
		e.stopTimer()
	}
	return nil
}

func (c *Client) newID() string {
	return c.idPrefix + strconv.FormatUint(c.seq.Add(1), 10)
}

func (c *Client) send(z *zconn, id, msgType string, content any) error {
	return c.sendReply(z, id, msgType, nil, content)
}

func (c *Client) sendReply(z *zconn, id, msgType string, parent *Header, content any) error {
	frames, err := c.sign.encode(nil, c.sign.header(id, msgType), parent, content)
	if err != nil {
		return err
	}
	if err := z.writeMessage(frames); err != nil {
		c.fail(err)
		return c.err // the first failure: a write after a reader failed reports the reader's error
	}
	return nil
}

// reader owns one connection: it reads, authenticates and dispatches every
// message as soon as it arrives, so the kernel's PUB socket never has to drop
// anything because we lag. A panic here ends the session, not the process.
func (c *Client) reader(z *zconn) {
	defer c.wg.Done()
	defer func() {
		if r := recover(); r != nil {
			c.fail(fmt.Errorf("kernel %s socket: internal error: %v\n%s", z.name, r, debug.Stack()))
		}
	}()
	v := newVerifier(c.sign.key)
	for {
		frames, err := z.readMessage()
		if err != nil {
			select {
			case <-c.done: // closed on purpose, or another socket failed first
			default:
				var pe *ProtocolError
				if !errors.As(err, &pe) {
					err = fmt.Errorf("%w (kernel %s socket: %v; did the kernel exit?)", ErrDisconnected, z.name, err)
				}
				c.fail(err)
			}
			return
		}
		m, err := parseMessage(frames, v)
		if err != nil && c.opts.OnMessage != nil && errors.Is(err, errSigned) {
			c.fail(&ProtocolError{Socket: z.name, Msg: "kernel sent a signed message that is not a valid Jupyter message: " + clip(err.Error(), 200)})
			return
		}
		if err != nil {
			if errors.Is(err, errBadSignature) {
				c.stats.badSig.Add(1)
			} else {
				c.stats.malformed.Add(1)
			}
			continue
		}
		c.stats.messages.Add(1)
		c.dispatch(z, m)
	}
}

func (c *Client) dispatch(z *zconn, m *Message) {
	pid := m.Parent.MsgID
	if c.opts.OnMessage != nil && !strings.HasPrefix(pid, c.idPrefix) {
		r, err := rawOf(z, m)
		if err != nil {
			c.fail(err)
			return
		}
		c.opts.OnMessage(r)
		return
	}
	c.mu.Lock()
	e := c.pending[pid]
	w := c.waiters[pid]
	if e == nil && w == nil && pid != "" && c.isRecent(pid) {
		c.mu.Unlock()
		if z == c.stdin && m.Header.MsgType == "input_request" {
			c.answerInput(m)
		}
		c.stats.late.Add(1)
		return
	}
	if z == c.iopub && m.Header.MsgType == "status" && c.kinfoIDs[pid] && !c.iopubOK {
		c.iopubOK = true
		close(c.iopubUp)
	}
	c.mu.Unlock()

	switch {
	case e != nil:
		if !e.handle(z, m) {
			c.stats.late.Add(1)
		}
		if z == c.stdin && m.Header.MsgType == "input_request" {
			c.answerInput(m)
		}
	case w != nil && z != c.iopub && z != c.stdin:
		select {
		case w <- m:
		default:
		}
	default:
		if z == c.stdin && m.Header.MsgType == "input_request" {
			c.answerInput(m) // never leave the kernel blocked in input()
		}
		c.stats.unmatched.Add(1)
	}
}

// answerInput replies end-of-file ("\x04": ipykernel raises EOFError in
// input()) on the stdin socket.
func (c *Client) answerInput(m *Message) {
	c.stats.input.Add(1)
	parent := m.Header
	_ = c.sendReply(c.stdin, c.newID(), "input_reply", &parent, map[string]string{"value": "\x04"})
}

func (c *Client) isRecent(id string) bool {
	for _, r := range c.recent {
		if r == id {
			return true
		}
	}
	return false
}

// forget removes a completed execution and its barrier (called with e.mu
// held; takes c.mu).
func (c *Client) forget(e *execution) {
	c.mu.Lock()
	for _, id := range []string{e.id, e.probe} {
		if id == "" {
			continue
		}
		delete(c.pending, id)
		c.recent[c.recentN%len(c.recent)] = id
		c.recentN++
	}
	c.mu.Unlock()
}

// request sends a request on z and waits for the reply with that parent.
func (c *Client) request(ctx context.Context, z *zconn, msgType string, content any) (*Message, error) {
	if err := c.Err(); err != nil {
		return nil, err
	}
	id := c.newID()
	ch := make(chan *Message, 1)
	c.mu.Lock()
	c.waiters[id] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.waiters, id)
		c.mu.Unlock()
	}()
	if err := c.send(z, id, msgType, content); err != nil {
		return nil, err
	}
	select {
	case m := <-ch:
		return m, nil
	case <-c.done:
		return nil, c.Err()
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// KernelInfo asks the kernel for kernel_info (a cheap "are you serving
// requests" probe: it is answered only between cells).
func (c *Client) KernelInfo(ctx context.Context) (KernelInfo, error) {
	m, err := c.request(ctx, c.shell, "kernel_info_request", map[string]any{})
	if err != nil {
		return KernelInfo{}, err
	}
	var ki KernelInfo
	if err := json.Unmarshal(m.Content, &ki); err != nil {
		return KernelInfo{}, &ProtocolError{Socket: "shell", Msg: "kernel sent a malformed kernel_info_reply"}
	}
	return ki, nil
}

// Shutdown asks the kernel to exit (shutdown_request on the control socket)
// and waits for its reply. The caller still reaps the process.
func (c *Client) Shutdown(ctx context.Context) error {
	_, err := c.request(ctx, c.control, "shutdown_request", map[string]any{"restart": false})
	return err
}
