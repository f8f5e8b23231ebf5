package kernel

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"time"
)

// Connect dials the kernel's sockets (retrying while the kernel starts),
// subscribes to iopub, then sends kernel_info_request until iopub delivers a
// status message (iopub misses what is published before the subscription
// takes effect) and the reply arrives. It is bounded by ctx.
func Connect(ctx context.Context, ci ConnInfo, opts Options) (*Client, error) {
	if err := ci.validate(); err != nil {
		return nil, err
	}
	c := newClient(ci, opts.withDefaults())
	err := c.dialAll(ctx, ci)
	if err == nil {
		err = c.awaitKernelInfo(ctx)
	}
	if err != nil {
		c.fail(err)
		c.Close()
		return nil, c.err // the first failure (e.g. a reader's protocol error), not its consequences
	}
	return c, nil
}

// newClient returns a Client with a fresh session and identity, not yet
// connected.
func newClient(ci ConnInfo, opts Options) *Client {
	var rnd [12]byte
	_, _ = rand.Read(rnd[:])
	sess := hex.EncodeToString(rnd[:8])
	return &Client{
		opts:     opts,
		sign:     &signer{key: []byte(ci.Key), session: sess, username: opts.Username},
		identity: []byte("cubicle-" + hex.EncodeToString(rnd[8:])),
		idPrefix: sess + "_",
		pending:  map[string]*execution{},
		waiters:  map[string]chan *Message{},
		kinfoIDs: map[string]bool{},
		iopubUp:  make(chan struct{}),
		done:     make(chan struct{}),
	}
}

// dialAll connects iopub (subscribed to everything), shell, stdin and
// control, and starts a reader for each.
func (c *Client) dialAll(ctx context.Context, ci ConnInfo) error {
	var err error
	if c.iopub, err = c.dial(ctx, ci, "iopub", ci.IOPubPort, "SUB"); err != nil {
		return err
	}
	// Subscribe to everything: a message whose body is 0x01 + empty topic.
	if err := c.iopub.writeMessage([][]byte{{1}}); err != nil {
		return err
	}
	if c.shell, err = c.dial(ctx, ci, "shell", ci.ShellPort, "DEALER"); err != nil {
		return err
	}
	if c.stdin, err = c.dial(ctx, ci, "stdin", ci.StdinPort, "DEALER"); err != nil {
		return err
	}
	if c.control, err = c.dial(ctx, ci, "control", ci.ControlPort, "DEALER"); err != nil {
		return err
	}
	for _, z := range []*zconn{c.iopub, c.shell, c.stdin, c.control} {
		c.wg.Add(1)
		go c.reader(z)
	}
	return nil
}

// dial connects one socket and performs the ZMTP handshake.
func (c *Client) dial(ctx context.Context, ci ConnInfo, name string, port int, typ string) (*zconn, error) {
	opts := c.opts
	lim := limits{maxFrame: opts.MaxFrameBytes, maxFrames: opts.MaxMessageFrames, maxMsg: opts.MaxMessageBytes, stall: opts.StallTimeout}
	network, addr := ci.addr(port)
	conn, err := dialRetry(ctx, network, addr)
	if err != nil {
		return nil, fmt.Errorf("kernel %s socket (%s): %w", name, addr, err)
	}
	z, err := handshake(ctx, conn, name, typ, c.identity, lim, opts.WriteTimeout)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return z, nil
}

// awaitKernelInfo repeats kernel_info_request, with a growing interval,
// until a reply has arrived and iopub has delivered a status for one of
// them; the reply becomes c.info.
func (c *Client) awaitKernelInfo(ctx context.Context) error {
	replies := make(chan *Message, 64)
	interval := 50 * time.Millisecond
	timer := time.NewTimer(0)
	defer timer.Stop()
	var reply *Message
	up := c.iopubUp
	for reply == nil || !c.iopubReady() {
		select {
		case <-timer.C:
			if c.iopubReady() {
				continue // only waiting for a reply now
			}
			id := c.newID()
			c.mu.Lock()
			c.kinfoIDs[id] = true
			c.waiters[id] = replies
			c.mu.Unlock()
			if err := c.send(c.shell, id, "kernel_info_request", map[string]any{}); err != nil {
				return err
			}
			timer.Reset(interval)
			interval = min(2*interval, time.Second)
		case m := <-replies:
			reply = m
		case <-up:
			up = nil
		case <-c.done:
			return c.Err()
		case <-ctx.Done():
			return fmt.Errorf("kernel: connecting: %w (no kernel_info reply and iopub status yet)", context.Cause(ctx))
		}
	}
	c.mu.Lock()
	for id := range c.kinfoIDs {
		delete(c.waiters, id)
	}
	c.mu.Unlock()
	if err := json.Unmarshal(reply.Content, &c.info); err != nil {
		return &ProtocolError{Socket: "shell", Msg: "kernel sent a malformed kernel_info_reply"}
	}
	return nil
}

func (c *Client) iopubReady() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.iopubOK
}

func dialRetry(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	backoff := 10 * time.Millisecond
	for {
		conn, err := d.DialContext(ctx, network, addr)
		if err == nil {
			return conn, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w (last error: %v)", context.Cause(ctx), err)
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (last error: %v)", context.Cause(ctx), err)
		}
		backoff = min(2*backoff, 100*time.Millisecond)
	}
}
