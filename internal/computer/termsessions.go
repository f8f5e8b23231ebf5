package computer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// Terminal sessions: a terminal outlives its client. Its output goes to
// a bounded scrollback (the newest TerminalScrollback bytes) and to the
// client attached, if any; a client that leaves detaches it, and it is
// hung up only when no client attached again within the grace period
// (Config.TerminalGrace). A client that attaches gets the scrollback,
// then the output as it comes; a second client takes it over from the
// first. An ended terminal stays readable (its scrollback, its exit) for
// the grace period too.

const (
	// TerminalScrollback is how many bytes of a terminal's newest output
	// are kept for a client that attaches.
	TerminalScrollback = 256 << 10
	// maxTerminalSessions bounds the sessions a computer holds, running or
	// ended (the sandbox bounds those running): past it the oldest ended
	// one is forgotten.
	maxTerminalSessions = 2 * sandbox.MaxTerminals
)

// TerminalSession is a terminal and its clients.
type TerminalSession struct {
	id       string
	computer string
	req      TerminalRequest
	created  time.Time
	grace    time.Duration
	t        sandbox.Terminal
	forget   func() // removes it from the registry
	done     chan struct{}

	mu         sync.Mutex
	ring       []byte // scrollback: the newest TerminalScrollback bytes are its tail
	client     *TerminalAttachment
	detachedAt time.Time
	timer      *time.Timer // the grace period's end, while detached or ended
	cols, rows int
	st         sandbox.ExitStatus
	err        error
	ended      bool
	endedAt    time.Time
}

// TerminalAttachment is one client's attachment to a session.
type TerminalAttachment struct {
	s        *TerminalSession
	out      io.Writer
	replaced chan struct{} // closed when another client took the session over
}

// TerminalInfo describes a session.
type TerminalInfo struct {
	ID         string
	Pid        int
	Argv       []string
	Command    string
	Cwd        string
	Cols, Rows int
	Attached   bool
	Running    bool
	Exit       *sandbox.ExitStatus // once it ended
	CreatedAt  time.Time
	DetachedAt time.Time // zero while attached
}

// ID is the session's id (term_…).
func (s *TerminalSession) ID() string { return s.id }

// Write takes the terminal's output (one goroutine): into the
// scrollback, and to the client attached, whose writer may hold it back.
func (s *TerminalSession) Write(b []byte) (int, error) {
	s.mu.Lock()
	s.ring = append(s.ring, b...)
	if len(s.ring) > TerminalScrollback+TerminalScrollback/2 {
		s.ring = append(s.ring[:0], s.ring[len(s.ring)-TerminalScrollback:]...)
	}
	c := s.client
	s.mu.Unlock()
	if c != nil {
		c.out.Write(b)
	}
	return len(b), nil
}

// Attach makes out the session's client, taking it over from the one
// before (whose Replaced closes). It returns the scrollback; out then
// receives the output that follows, none lost and none repeated.
func (s *TerminalSession) Attach(out io.Writer) ([]byte, *TerminalAttachment) {
	a := &TerminalAttachment{s: s, out: out, replaced: make(chan struct{})}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client != nil {
		close(s.client.replaced)
	}
	s.client = a
	if s.timer != nil && !s.ended {
		s.timer.Stop()
		s.timer = nil
	}
	s.detachedAt = time.Time{}
	n := min(len(s.ring), TerminalScrollback)
	return append([]byte(nil), s.ring[len(s.ring)-n:]...), a
}

// Replaced is closed when another client took the session over.
func (a *TerminalAttachment) Replaced() <-chan struct{} { return a.replaced }

// Detach ends the attachment (its writer gets nothing more). With
// hangup, or without a grace period, the terminal is hung up at once;
// otherwise when no client attached within the grace period.
func (a *TerminalAttachment) Detach(hangup bool) {
	s := a.s
	s.mu.Lock()
	if s.client != a {
		s.mu.Unlock()
		return
	}
	s.client = nil
	s.detachedAt = time.Now()
	if !hangup && s.grace > 0 && !s.ended {
		s.timer = time.AfterFunc(s.grace, func() {
			s.mu.Lock()
			orphaned := s.client == nil && !s.ended
			s.mu.Unlock()
			if orphaned {
				s.t.Hangup()
			}
		})
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.t.Hangup()
}

// Input sends raw input to the terminal.
func (s *TerminalSession) Input(ctx context.Context, b []byte) error { return s.t.Input(ctx, b) }

// Resize sets the terminal's size.
func (s *TerminalSession) Resize(cols, rows int) error {
	if err := s.t.Resize(cols, rows); err != nil {
		return err
	}
	s.mu.Lock()
	s.cols, s.rows = cols, rows
	s.mu.Unlock()
	return nil
}

// Hangup hangs the terminal up.
func (s *TerminalSession) Hangup() { s.t.Hangup() }

// Done is closed once the terminal ended and all of its output was
// written.
func (s *TerminalSession) Done() <-chan struct{} { return s.done }

// Wait returns how the terminal's main process ended.
func (s *TerminalSession) Wait() (sandbox.ExitStatus, error) {
	<-s.done
	return s.st, s.err
}

// Info describes the session.
func (s *TerminalSession) Info() TerminalInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := TerminalInfo{ID: s.id, Pid: s.t.Pid(), Argv: s.req.Argv, Command: s.req.Command, Cwd: s.req.Cwd,
		Cols: s.cols, Rows: s.rows, Attached: s.client != nil, Running: !s.ended, CreatedAt: s.created, DetachedAt: s.detachedAt}
	if s.ended {
		st := s.st
		if s.err != nil {
			st.ExitCode = -1
		}
		in.Exit = &st
	}
	return in
}

// end records the terminal's end; the session is forgotten after the
// grace period (at once without one).
func (s *TerminalSession) end(st sandbox.ExitStatus, err error) {
	s.mu.Lock()
	s.st, s.err, s.ended, s.endedAt = st, err, true, time.Now()
	if s.timer != nil {
		s.timer.Stop()
	}
	s.timer = time.AfterFunc(s.grace, s.forget)
	s.mu.Unlock()
	close(s.done)
}

// terminalRegistry holds every computer's sessions.
type terminalRegistry struct {
	mu    sync.Mutex
	byCmp map[string][]*TerminalSession // oldest first
}

func (r *terminalRegistry) add(s *TerminalSession) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byCmp == nil {
		r.byCmp = make(map[string][]*TerminalSession)
	}
	list := r.byCmp[s.computer]
	if len(list) >= maxTerminalSessions {
		if i := slices.IndexFunc(list, func(x *TerminalSession) bool {
			x.mu.Lock()
			defer x.mu.Unlock()
			return x.ended
		}); i >= 0 {
			list = slices.Delete(list, i, i+1)
		}
	}
	r.byCmp[s.computer] = append(list, s)
}

func (r *terminalRegistry) remove(s *TerminalSession) {
	r.mu.Lock()
	defer r.mu.Unlock()
	list := slices.DeleteFunc(r.byCmp[s.computer], func(x *TerminalSession) bool { return x == s })
	if len(list) == 0 {
		delete(r.byCmp, s.computer)
	} else {
		r.byCmp[s.computer] = list
	}
}

func (r *terminalRegistry) list(computer string) []*TerminalSession {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.byCmp[computer])
}

// newTerminalSession is a session of computer id, not yet registered.
func (m *Manager) newTerminalSession(id string, req TerminalRequest) *TerminalSession {
	var b [8]byte
	rand.Read(b[:])
	s := &TerminalSession{id: "term_" + hex.EncodeToString(b[:]), computer: id, req: req, created: time.Now().UTC(),
		grace: max(m.cfg.TerminalGrace, 0), done: make(chan struct{}), cols: req.Cols, rows: req.Rows}
	s.forget = func() { m.terms.remove(s) }
	return s
}

// Terminal finds a session of a running computer of p's organisation,
// running or ended within its grace period.
func (m *Manager) Terminal(ctx context.Context, p governance.Principal, id, tid string) (*TerminalSession, error) {
	if _, err := m.running(ctx, p, id); err != nil {
		return nil, err
	}
	for _, s := range m.terms.list(id) {
		if s.id == tid {
			return s, nil
		}
	}
	return nil, errdefs.New(errdefs.NotFound, "", fmt.Sprintf("no such terminal: %s (it ended, or was hung up when no client attached within its grace period)", tid))
}

// ListTerminals describes the terminal sessions of a running computer of
// p's organisation, oldest first.
func (m *Manager) ListTerminals(ctx context.Context, p governance.Principal, id string) ([]TerminalInfo, error) {
	if _, err := m.running(ctx, p, id); err != nil {
		return nil, err
	}
	out := []TerminalInfo{}
	for _, s := range m.terms.list(id) {
		out = append(out, s.Info())
	}
	return out, nil
}
