package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// Request is one cell to execute.
type Request struct {
	Code string
	// OnOutput, if set, is called in the caller's goroutine (inside Run) for
	// each output as it arrives, at most every deliverEvery: what came in
	// between is coalesced (stream chunks of one stream merged, what a
	// clear_output drops and updates superseded left out), OutUpdate and
	// OutClear as events. Result.Outputs is the merged, final view.
	OnOutput func(Output)
	// MaxOutputBytes overrides Options.MaxOutputBytes for this cell.
	MaxOutputBytes int64
}

// Result is the outcome of one cell.
type Result struct {
	// Status is execute_reply's status: "ok", "error" or "aborted"; empty
	// when the cell completed without a reply (ReplyMissing) or did not
	// complete (Cancelled).
	Status         string   `json:"status"`
	ExecutionCount int      `json:"execution_count,omitempty"`
	Outputs        []Output `json:"outputs"`
	// Error is the cell's exception: its error output, or one built from an
	// error reply when that output was lost.
	Error *Output `json:"error,omitempty"`
	// InputRequested: the cell called input() (or getpass); the request was
	// answered with end-of-file, so input() raised EOFError.
	InputRequested bool `json:"input_requested,omitempty"`
	// Cancelled: the context ended before the kernel finished the cell. The
	// cell may still be running: interrupt the kernel, then WaitIdle.
	Cancelled bool `json:"cancelled,omitempty"`
	// Completed: the kernel finished the cell.
	Completed bool `json:"completed"`
	// ReplyMissing / IdleMissing: completion was decided by the grace
	// period after only one of status idle / execute_reply.
	ReplyMissing bool `json:"reply_missing,omitempty"`
	IdleMissing  bool `json:"idle_missing,omitempty"`
	// Truncated: the output cap was reached (an OutTruncated marker says
	// how much was dropped).
	Truncated bool `json:"truncated,omitempty"`
	// Duplicates counts images not repeated because the cell already showed
	// the same image.
	Duplicates int           `json:"duplicates,omitempty"`
	Duration   time.Duration `json:"duration"`
}

// Failed reports whether the cell raised, was aborted, or asked for input.
func (r *Result) Failed() bool {
	return r.Error != nil || r.Status == "error" || r.Status == "aborted" || r.InputRequested
}

type executeReply struct {
	Status         string   `json:"status"`
	ExecutionCount *int     `json:"execution_count"`
	EName          string   `json:"ename"`
	EValue         string   `json:"evalue"`
	Traceback      []string `json:"traceback"`
	Payload        []struct {
		Source string                     `json:"source"`
		Data   map[string]json.RawMessage `json:"data"`
	} `json:"payload"`
}

type execution struct {
	c      *Client
	id     string
	start  time.Time
	notify chan struct{} // cap 1: outputs are waiting in col.events
	doneCh chan struct{}

	mu        sync.Mutex
	col       *collector
	replied   bool
	idle      bool
	reply     executeReply
	execCount int
	inputReq  bool
	done      bool
	cancelled bool
	timer     *time.Timer
	end       time.Time
	// probe is the msg_id of the iopub barrier (see graceExpired), once
	// sent: its status on iopub means every output the kernel published
	// before it has been read.
	probe string
}

// deliverEvery is the least time between two deliveries of outputs to a
// Request's OnOutput.
const deliverEvery = 50 * time.Millisecond

// Execute runs code with stop_on_error=false, allow_stdin=true and
// store_history=true; see Run.
func (c *Client) Execute(ctx context.Context, code string, onOutput func(Output)) (Result, error) {
	return c.Run(ctx, Request{Code: code, OnOutput: onOutput})
}

// Run executes one cell and waits until the kernel has finished it:
// execute_reply and status idle both seen, or one of them plus the grace
// period of silence. A cell that raises is not an error: see Result.Error.
//
// When ctx ends first, Run returns promptly with the outputs so far,
// Cancelled set, and an error wrapping the context's cause; the cell keeps
// running in the kernel until the caller interrupts it (SIGINT to the kernel
// process), after which WaitIdle returns its final result.
//
// Cells may be run concurrently; the kernel runs them one at a time in the
// order received.
func (c *Client) Run(ctx context.Context, req Request) (Result, error) {
	if err := c.Err(); err != nil {
		return Result{}, err
	}
	e, err := c.startExecution(req)
	if err != nil {
		return Result{}, err
	}
	return e.wait(ctx, req.OnOutput)
}

// startExecution registers a pending execution for req and sends its
// execute_request.
func (c *Client) startExecution(req Request) (*execution, error) {
	limit := req.MaxOutputBytes
	if limit <= 0 {
		limit = c.opts.MaxOutputBytes
	}
	e := &execution{
		c:      c,
		id:     c.newID(),
		start:  time.Now(),
		notify: make(chan struct{}, 1),
		doneCh: make(chan struct{}),
		col:    newCollector(limit, c.opts.MaxImageBytes),
	}
	c.mu.Lock()
	c.pending[e.id] = e
	c.mu.Unlock()
	content := map[string]any{
		"code":             req.Code,
		"silent":           false,
		"store_history":    true,
		"user_expressions": map[string]any{},
		"allow_stdin":      true,
		"stop_on_error":    false,
	}
	if err := c.send(c.shell, e.id, "execute_request", content); err != nil {
		c.mu.Lock()
		delete(c.pending, e.id)
		c.mu.Unlock()
		return nil, err
	}
	return e, nil
}

// wait delivers e's outputs to onOutput (if not nil) until e completes, the
// Client ends or ctx ends (then e is abandoned: see WaitIdle).
func (e *execution) wait(ctx context.Context, onOutput func(Output)) (Result, error) {
	c := e.c
	deliver := func() {
		e.mu.Lock()
		ev := e.col.drainEvents()
		e.mu.Unlock()
		if onOutput != nil {
			for _, o := range ev {
				onOutput(o)
			}
		}
	}
	// Deliveries are paced: outputs arriving within deliverEvery of the last
	// delivery wait for the timer, so a flood of tiny messages becomes a few
	// coalesced outputs.
	var last time.Time
	pace := time.NewTimer(time.Hour)
	pace.Stop()
	defer pace.Stop()
	paced := false
	for {
		select {
		case <-e.notify:
			if wait := deliverEvery - time.Since(last); wait > 0 {
				if !paced {
					pace.Reset(wait)
					paced = true
				}
				continue
			}
			deliver()
			last = time.Now()
		case <-pace.C:
			paced = false
			deliver()
			last = time.Now()
		case <-e.doneCh:
			deliver()
			return e.result(), nil
		case <-c.done:
			deliver()
			if e.completed() {
				return e.result(), nil
			}
			return e.result(), c.Err()
		case <-ctx.Done():
			deliver()
			if e.completed() {
				return e.result(), nil
			}
			e.abandon()
			return e.result(), fmt.Errorf("kernel: execution cancelled: %w", context.Cause(ctx))
		}
	}
}

// completed reports whether e has finished.
func (e *execution) completed() bool {
	select {
	case <-e.doneCh:
		return true
	default:
		return false
	}
}

// abandon marks e cancelled: no more streamed events, and WaitIdle waits
// for it.
func (e *execution) abandon() {
	e.mu.Lock()
	e.cancelled = true
	e.col.stopEvents()
	e.mu.Unlock()
	e.c.mu.Lock()
	e.c.abandoned = append(e.c.abandoned, e)
	e.c.mu.Unlock()
}

// WaitIdle waits until every cell abandoned by a cancelled Run has finished
// in the kernel (normally after the caller interrupted it) and returns their
// final results, oldest first: all their outputs, including those that
// arrived after Run returned (typically the KeyboardInterrupt traceback).
// With nothing abandoned it returns at once. If ctx ends first the kernel is
// not yielding: restart it.
func (c *Client) WaitIdle(ctx context.Context) ([]Result, error) {
	c.mu.Lock()
	ab := append([]*execution(nil), c.abandoned...)
	c.mu.Unlock()
	var out []Result
	for _, e := range ab {
		select {
		case <-e.doneCh:
		case <-c.done:
			return out, c.Err()
		case <-ctx.Done():
			return out, fmt.Errorf("kernel: still busy: %w", context.Cause(ctx))
		}
		out = append(out, e.result())
	}
	c.mu.Lock()
	kept := c.abandoned[:0]
	for _, e := range c.abandoned {
		if !e.completed() {
			kept = append(kept, e)
		}
	}
	c.abandoned = kept
	c.mu.Unlock()
	return out, nil
}

func (e *execution) signal() {
	select {
	case e.notify <- struct{}{}:
	default:
	}
}

// handle applies a message whose parent is this execution. It returns false
// when the execution had already completed (the message is late).
func (e *execution) handle(z *zconn, m *Message) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.done {
		return false
	}
	c := e.c
	if e.probe != "" && m.Parent.MsgID == e.probe {
		// The barrier: its status follows on iopub whatever the kernel
		// published before it, so nothing of the cell is still on the way.
		if z == c.iopub && m.Header.MsgType == "status" {
			e.finish()
			e.signal()
		}
		return true
	}
	switch z {
	case c.iopub:
		switch m.Header.MsgType {
		case "status":
			var st struct {
				State string `json:"execution_state"`
			}
			if err := decodeContent(m, &st); err != nil {
				c.stats.malformed.Add(1)
			} else if st.State == "idle" {
				e.idle = true
			}
		case "execute_input":
			var in struct {
				ExecutionCount *int `json:"execution_count"`
			}
			if err := decodeContent(m, &in); err == nil && in.ExecutionCount != nil {
				e.execCount = *in.ExecutionCount
			}
		default:
			if err := e.col.handle(m); err != nil {
				c.stats.malformed.Add(1)
			}
		}
	case c.shell:
		if m.Header.MsgType != "execute_reply" || e.replied {
			c.stats.unmatched.Add(1)
			return true
		}
		var r executeReply
		if err := decodeContent(m, &r); err != nil {
			c.stats.malformed.Add(1)
			return true // the idle grace completes the cell
		}
		e.replied, e.reply = true, r
		for _, p := range r.Payload {
			if p.Source == "page" { // `obj?` help: shown as a pager in IPython
				if s, ok := mimeText(p.Data["text/plain"]); ok {
					e.col.admit(Output{Type: OutDisplay, MIME: "text/plain", Text: stripANSI(s)})
				}
			}
		}
	case c.stdin:
		if m.Header.MsgType == "input_request" {
			var in struct {
				Prompt string `json:"prompt"`
			}
			_ = decodeContent(m, &in)
			e.inputReq = true
			e.col.addInput(in.Prompt)
		}
	}
	e.check(z == c.iopub)
	e.signal()
	return true
}

// check completes the execution when both execute_reply and idle arrived,
// or arms the grace timer when one did. While waiting for idle, any iopub
// traffic for the cell restarts the grace period.
//
// The grace does not complete a cell whose reply came without idle: the
// reply and iopub are different sockets, and a loaded host can read the
// reply seconds before the output the kernel published ahead of it (the
// reader lags, or the whole process stalls and the timer fires before the
// reader runs again). graceExpired sends a barrier instead.
func (e *execution) check(iopub bool) {
	if e.replied && e.idle {
		e.finish()
		return
	}
	if !e.replied && !e.idle {
		return
	}
	if e.timer == nil {
		e.timer = time.AfterFunc(e.c.opts.Grace, e.graceExpired)
	} else if iopub && !e.idle {
		e.timer.Reset(e.silence())
	}
}

// barrierWait is how many Graces of iopub silence a barrier is given: it is
// answered unless the kernel's iopub is stuck or drops messages.
const barrierWait = 5

// silence is how long the cell may go without iopub traffic once it has
// its reply or idle.
func (e *execution) silence() time.Duration {
	if e.probe != "" {
		return barrierWait * e.c.opts.Grace
	}
	return e.c.opts.Grace
}

// graceExpired completes a cell that has had its idle but no reply for
// Grace. One that has its reply but no idle is completed only once
// everything the kernel published before now has been read: it sends a
// barrier (kernel_info_request on the control socket, answered by ipykernel
// even while a cell runs, with a busy status on iopub that follows every
// message published before it) and completes the cell when that status
// arrives, or after barrierWait Graces without iopub traffic for the cell
// (the kernel answers no barrier: its idle was lost).
func (e *execution) graceExpired() {
	defer func() {
		if r := recover(); r != nil {
			e.c.fail(fmt.Errorf("kernel: internal error in completion timer: %v", r))
		}
	}()
	e.mu.Lock()
	if e.done {
		e.mu.Unlock()
		return
	}
	if !e.replied || e.probe != "" {
		e.finish()
		e.signal()
		e.mu.Unlock()
		return
	}
	c := e.c
	e.probe = c.newID()
	c.mu.Lock()
	c.pending[e.probe] = e
	c.mu.Unlock()
	e.timer.Reset(e.silence())
	probe := e.probe
	e.mu.Unlock()
	// Not under e.mu: the write may wait for the kernel (WriteTimeout) while
	// the readers go on.
	if err := c.send(c.control, probe, "kernel_info_request", map[string]any{}); err != nil {
		e.mu.Lock()
		if !e.done {
			e.finish()
			e.signal()
		}
		e.mu.Unlock()
	}
}

func (e *execution) finish() {
	e.done = true
	e.end = time.Now()
	if e.timer != nil {
		e.timer.Stop()
	}
	close(e.doneCh)
	e.c.forget(e)
}

func (e *execution) stopTimer() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.timer != nil {
		e.timer.Stop()
	}
}

func (e *execution) result() Result {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := Result{
		ExecutionCount: e.execCount,
		Outputs:        e.col.outputs(),
		InputRequested: e.inputReq,
		Cancelled:      e.cancelled,
		Completed:      e.done,
		Truncated:      e.col.marker != nil,
		Duplicates:     e.col.dedup,
	}
	if e.done {
		r.Duration = e.end.Sub(e.start)
		r.ReplyMissing = !e.replied
		r.IdleMissing = !e.idle
	} else {
		r.Duration = time.Since(e.start)
	}
	if e.replied {
		r.Status = e.reply.Status
		if e.reply.ExecutionCount != nil {
			r.ExecutionCount = *e.reply.ExecutionCount
		}
	}
	for i := range r.Outputs {
		if r.Outputs[i].Type == OutError {
			o := r.Outputs[i]
			r.Error = &o
			break
		}
	}
	if r.Error == nil && e.replied && e.reply.Status == "error" {
		o := Output{Type: OutError, EName: stripANSI(clip(e.reply.EName, 256)), EValue: stripANSI(clip(e.reply.EValue, 4096))}
		for _, t := range e.reply.Traceback {
			o.Traceback = append(o.Traceback, stripANSI(clip(t, errorReserve)))
		}
		r.Error = &o
	}
	return r
}
