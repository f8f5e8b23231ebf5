package jupyter

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/log"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// kernel is one kernel of the registry: a computer of its own and the
// relay to the kernel inside it.
type kernel struct {
	id         string
	spec       string // its kernel spec's name
	computerID string
	// p is the creating key's principal: the culler and clean-ups act as it.
	p   governance.Principal
	env map[string]string
	cwd string

	ops sync.Mutex // serialises restart and shut-down

	// malformed counts kernel messages that could not be encoded for the
	// clients; only the first is logged (a hostile kernel cannot flood the log).
	malformed atomic.Int64

	mu           sync.Mutex
	relay        sandbox.Kernel
	relayDone    bool // the relay's messages ended (the kernel is dead)
	state        string
	lastActivity time.Time
	conns        map[*conn]struct{}
	reserved     int // slots taken by upgrades not yet attached
	parents      parentMap
	gone         bool
}

// Execution states a kernel reports on iopub (anything else is ignored).
var knownStates = map[string]bool{"starting": true, "idle": true, "busy": true, "restarting": true, "dead": true}

// model is the kernel model of the Jupyter REST API.
type model struct {
	ID             string `json:"id"`
	Name           string `json:"name"`
	LastActivity   string `json:"last_activity"`
	ExecutionState string `json:"execution_state"`
	Connections    int    `json:"connections"`
}

// jupyterTime is the last_activity format jupyter_server parses
// (%Y-%m-%dT%H:%M:%S.%fZ).
const jupyterTime = "2006-01-02T15:04:05.000000Z"

func (k *kernel) model() model {
	k.mu.Lock()
	defer k.mu.Unlock()
	return model{ID: k.id, Name: k.spec, LastActivity: k.lastActivity.UTC().Format(jupyterTime),
		ExecutionState: k.state, Connections: len(k.conns)}
}

func (k *kernel) touch() {
	k.mu.Lock()
	k.lastActivity = time.Now()
	k.mu.Unlock()
}

// idleSince is how long the kernel has had no connection, no activity and
// no running cell (0 while it has any).
func (k *kernel) idleSince(now time.Time) time.Duration {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.gone || len(k.conns) > 0 || k.state == "busy" {
		return 0
	}
	return now.Sub(k.lastActivity)
}

// maxConns bounds a kernel's WebSocket connections.
const maxConns = 32

func (k *kernel) connections() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.conns)
}

// reserve takes one of the kernel's maxConns connection slots for an
// upgrade (attach or unreserve gives it back); false with the number of
// connections when none is left. Checking the count alone let concurrent
// upgrades pass it together.
func (k *kernel) reserve() (int, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if n := len(k.conns) + k.reserved; n >= maxConns {
		return n, false
	}
	k.reserved++
	return 0, true
}

func (k *kernel) unreserve() {
	k.mu.Lock()
	k.reserved--
	k.mu.Unlock()
}

// attach adds a connection in a reserved slot; false once the kernel is
// gone.
func (k *kernel) attach(c *conn) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.reserved--
	if k.gone {
		return false
	}
	k.conns[c] = struct{}{}
	return true
}

func (k *kernel) detach(c *conn) {
	k.mu.Lock()
	delete(k.conns, c)
	k.lastActivity = time.Now()
	k.mu.Unlock()
}

// send relays a client's message, remembering which connection asked so
// that the replies go back to it alone.
func (k *kernel) send(ctx context.Context, c *conn, m sandbox.KernelMessage, msgID string) error {
	k.mu.Lock()
	relay, done := k.relay, k.relayDone
	k.parents.put(msgID, c)
	k.lastActivity = time.Now()
	k.mu.Unlock()
	if done {
		return errDead
	}
	return relay.Send(ctx, m)
}

// pump delivers everything the relay sends until it ends.
func (k *kernel) pump(s *Server, relay sandbox.Kernel) {
	ctx := k.logContext()
	for m := range relay.Messages() {
		k.deliver(ctx, m)
	}
	k.mu.Lock()
	current := k.relay == relay && !k.gone
	if current {
		k.relayDone, k.state = true, "dead"
	}
	k.mu.Unlock()
	if current {
		s.relayEnded(k, relay.Err())
	}
}

// logContext carries the logger of k's background work (its pump), which
// outlives the request that started it.
func (k *kernel) logContext() context.Context {
	ctx := context.Background()
	return log.Into(ctx, "", log.From(ctx).With("kernel", k.id, "computer", k.computerID))
}

// deliver routes one message from the kernel: iopub to every connection;
// shell, stdin and control to the connection whose request is its parent,
// or to every connection when that one is gone (a client that reconnected
// still gets its reply). A connection too slow to take a message is
// closed, never silently skipped.
func (k *kernel) deliver(ctx context.Context, m sandbox.KernelMessage) {
	switch m.Channel {
	case chIOPub, chShell, chStdin, chControl:
	default:
		return
	}
	f, err := encodeKernel(m)
	if err != nil {
		if k.malformed.Add(1) == 1 {
			log.From(ctx).WarnContext(ctx, "jupyter: dropped a malformed message from a kernel (later ones are not logged)", "kernel", k.id, "err", truncate(err.Error(), 200))
		}
		return
	}
	state := ""
	if f.channel == chIOPub && f.msgType == "status" {
		var c struct {
			ExecutionState string `json:"execution_state"`
		}
		if json.Unmarshal(m.Content, &c) == nil && knownStates[c.ExecutionState] {
			state = c.ExecutionState
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.lastActivity = time.Now()
	if state != "" {
		k.state = state
	}
	if f.channel != chIOPub {
		if c := k.parents.get(f.parentID); c != nil {
			if _, ok := k.conns[c]; ok {
				c.enqueue(f)
				return
			}
		}
	}
	for c := range k.conns {
		c.enqueue(f)
	}
}

// shut ends the kernel's connections and relay; its computer is the
// caller's to delete.
func (k *kernel) shut(ctx context.Context, reason string) {
	k.ops.Lock()
	defer k.ops.Unlock()
	k.mu.Lock()
	if k.gone {
		k.mu.Unlock()
		return
	}
	k.gone = true
	relay := k.relay
	conns := make([]*conn, 0, len(k.conns))
	for c := range k.conns {
		conns = append(conns, c)
	}
	clear(k.conns)
	k.mu.Unlock()
	for _, c := range conns {
		c.kill(websocket.StatusGoingAway, reason)
	}
	if err := relay.Close(ctx); err != nil && !errors.Is(err, sandbox.ErrGone) {
		log.From(ctx).DebugContext(ctx, "jupyter: close relay", "kernel", k.id, "err", err)
	}
}

// maxParents bounds the request → connection map of a kernel.
const maxParents = 8192

// parentMap remembers which connection sent a request, for its newest
// maxParents requests.
type parentMap struct {
	m    map[string]*conn
	ring []string
	next int
}

func (p *parentMap) put(id string, c *conn) {
	if p.m == nil {
		p.m = make(map[string]*conn)
	}
	if _, ok := p.m[id]; !ok {
		if len(p.ring) < maxParents {
			p.ring = append(p.ring, id)
		} else {
			delete(p.m, p.ring[p.next])
			p.ring[p.next] = id
			p.next = (p.next + 1) % maxParents
		}
	}
	p.m[id] = c
}

func (p *parentMap) get(id string) *conn {
	if id == "" {
		return nil
	}
	return p.m[id]
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
