package responses

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/log"
	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// Run is one response in progress.
type Run struct {
	g          *Gateway
	p          governance.Principal
	plan       *plan
	up         upstreamAPI // the upstream serving the request's model
	resp       *Response
	computerID string
	// note is the system note listing the copied input files, appended
	// after the tool messages of the round that created the computer.
	note      string
	toolCalls int
	// msgs is the conversation with the upstream once the loop ended.
	msgs []chatMessage
	send func(Event) error // nil: not streaming
	seq  int
	// started is when Begin made the run; timing adds up where its time
	// went (see Timing).
	started time.Time
	timing  Timing
	closed  bool // Close was called
	// keepComputer leaves the computer running after the answer (an
	// explicit container, or a stored response with
	// Config.ReuseComputers).
	keepComputer bool
	// Shell tasks (shelltasks.go): tasks, the response started one; held,
	// it runs in a computer the conversation keeps for them; hold, its
	// computer stays with the conversation (decideHold); lost, that
	// computer had ended; release ends the response's use of a kept
	// computer (Computers.Use).
	tasks, held, hold, lost bool
	release                 func()
	// turn is the upstream answer being turned into items (the last one
	// once the loop ended).
	turn *turnOutput
	// origin is Request.Origin.
	origin string
	// before are the workspace's files before the response's first code
	// ran (citeFiles); nil until then, or when they could not be listed.
	before map[string]fileStamp
	// view is the agent whose rounds run (the request's own outside
	// multi-agent responses); rounds counts the upstream rounds of all
	// agents; spawned are the subagents' names (multiagent.go).
	view    agentView
	rounds  int
	spawned []string
}

// Stream reports whether the request asked for streaming.
func (r *Run) Stream() bool { return r.plan.stream }

// ID is the response's id.
func (r *Run) ID() string { return r.resp.ID }

// emit sends one event with the next sequence number; a send error (the
// client left) is ignored here: the request context ends the run.
func (r *Run) emit(typ string, fields map[string]any) {
	if r.send == nil {
		return
	}
	if fields == nil {
		fields = map[string]any{}
	}
	r.attribute(fields)
	fields["sequence_number"] = r.seq
	r.seq++
	r.send(Event{Type: typ, Fields: fields})
}

// Create runs req for p to completion. Request errors are *Error (400)
// and are found before any upstream call; upstream failures are *Error
// (502); computer failures are the computer package's errors.
func (g *Gateway) Create(ctx context.Context, p governance.Principal, req *Request) (*Response, error) {
	r, err := g.Begin(ctx, p, req)
	if err != nil {
		return nil, err
	}
	defer r.Close(ctx)
	return r.Do(ctx, nil)
}

// Begin validates req for p and loads what it refers to (the previous
// response, image files); every request error is found here, before any
// upstream call and before anything is sent to the client.
func (g *Gateway) Begin(ctx context.Context, p governance.Principal, req *Request) (*Run, error) {
	start := time.Now()
	if err := g.resolveReferences(ctx, p, req); err != nil {
		return nil, err
	}
	req.datastores = g.dataLookup(p)
	sc, err := g.loadScripts(ctx, p, req.Tools)
	if err != nil {
		return nil, err
	}
	req.scripts = sc
	pl, err := req.validate(g.cfg.Model, g.comp.ToolsEnabled(p))
	if err != nil {
		return nil, err
	}
	up, err := g.routes.route(pl.model)
	if err != nil {
		return nil, err
	}
	if err := g.resolve(ctx, p, pl); err != nil {
		return nil, err
	}
	resp := &Response{ID: newID("resp_"), Object: "response", CreatedAt: time.Now().Unix(), Status: "in_progress",
		Model: pl.model, Output: []any{}, ToolChoice: json.RawMessage(`"auto"`), Tools: withoutSecretValues(req.Tools),
		Instructions: req.Instructions, MaxToolCalls: req.MaxToolCalls, Metadata: pl.metadata,
		ParallelToolCalls: req.ParallelToolCalls == nil || *req.ParallelToolCalls,
		Usage:             Usage{InputTokensDetails: map[string]int{"cached_tokens": 0}, OutputTokensDetails: map[string]int{"reasoning_tokens": 0}}}
	if len(req.ToolChoice) > 0 && string(req.ToolChoice) != "null" {
		resp.ToolChoice = req.ToolChoice
	}
	if resp.Tools == nil {
		resp.Tools = []json.RawMessage{}
	}
	if resp.Metadata == nil {
		resp.Metadata = map[string]string{}
	}
	resp.Store = g.responses != nil && (req.Store == nil || *req.Store)
	if err := checkBackground(pl, resp.Store, req.Store); err != nil {
		return nil, err
	}
	resp.PreviousResponseID = req.PreviousResponseID
	req.Params.echo(resp)
	if pl.multi, err = parseMultiAgent(req, resp.Store); err != nil {
		return nil, err
	}
	view := agentView{tools: pl.tools, choice: pl.toolChoice}
	if pl.multi != nil {
		view, resp.MultiAgent = rootView(pl), pl.multi
	}
	return &Run{g: g, p: p, plan: pl, up: up, resp: resp, started: start, origin: req.Origin, view: view}, nil
}

// snapshot is a copy of the response for an event.
func (r *Run) snapshot() Response {
	c := *r.resp
	c.Output = append([]any{}, r.resp.Output...)
	return c
}

// Do runs the response. With send, it streams the Responses events
// (response.created … response.completed, or response.failed after an
// error, which it also returns). The response's computer outlives Do:
// Close deletes it.
func (r *Run) Do(ctx context.Context, send func(Event) error) (*Response, error) {
	r.send = send
	r.emit("response.created", map[string]any{"response": r.snapshot()})
	if r.resp.Status == "queued" { // a background run (Gateway.Start)
		r.emit("response.queued", map[string]any{"response": r.snapshot()})
		r.resp.Status = "in_progress"
	}
	r.emit("response.in_progress", map[string]any{"response": r.snapshot()})
	if err := r.loop(ctx); err != nil {
		if r.send != nil {
			r.fail(ctx, err)
		}
		return nil, err
	}
	typ := "response.completed"
	if r.resp.Status == "incomplete" {
		typ = "response.incomplete"
	}
	r.citeFiles(ctx)
	r.resp.CompletedAt = ptr(time.Now().Unix())
	r.decideHold()
	r.keep(ctx)
	r.emit(typ, map[string]any{"response": r.snapshot()})
	return r.resp, nil
}

// fail ends a streamed response that failed: its unfinished items, its
// status and error, response.failed, and the stored copy. A background
// run that was cancelled (Gateway.Cancel) ends "cancelled" with
// response.cancelled instead; one the server stopped fails with the
// stop's reason (the cause of ctx).
func (r *Run) fail(ctx context.Context, err error) {
	r.closeUnfinished()
	cause := context.Cause(ctx)
	if ctx.Err() != nil && errors.Is(cause, errCancelled) {
		r.resp.Status = "cancelled"
		r.emit("response.cancelled", map[string]any{"response": r.snapshot()})
		r.keep(ctx)
		return
	}
	r.resp.Status = "failed"
	code, msg := "server_error", "The response failed; see the server log."
	var ge *Error
	if ctx.Err() != nil && errors.As(cause, &ge) || errors.As(err, &ge) {
		code, msg = ge.Code, ge.Message
	}
	r.resp.Error = map[string]string{"code": code, "message": msg}
	r.emit("response.failed", map[string]any{"response": r.snapshot()})
	r.keep(ctx)
}

// keep stores the response when it asked to be stored; a failure is
// logged (the response itself is still answered).
func (r *Run) keep(ctx context.Context) {
	if err := r.put(ctx); err != nil {
		log.From(ctx).ErrorContext(ctx, "gateway: storing the response failed", "response", r.resp.ID, "err", err)
	}
}

// put stores the response as it is now when it asked to be stored.
func (r *Run) put(ctx context.Context) error {
	if !r.resp.Store || r.g.responses == nil {
		return nil
	}
	body, err := json.Marshal(r.resp)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	instance := ""
	if r.plan.background && unfinished(r.resp.Status) {
		instance = r.g.instance // this server runs it (docs/fleet.md)
	}
	return r.g.responses.Put(ctx, store.Response{ID: r.resp.ID, OrgID: r.p.Org.ID, KeyID: r.p.Key.ID,
		CreatedAt: time.Unix(r.resp.CreatedAt, 0), Body: body, Conversation: r.conversation(ctx),
		Items: outputItems(r.resp.Output), Instance: instance})
}

// closeUnfinished ends the items of a response that failed: every item
// still in progress (a message or client call cut short, code that was
// streaming or running, a computer tool call) becomes "incomplete", as
// OpenAI marks what a response did not finish, and gets its
// response.output_item.done (before response.failed).
func (r *Run) closeUnfinished() {
	if r.turn != nil {
		r.turn.abandon()
	}
	for i, it := range r.resp.Output {
		u, ok := it.(interface{ asIncomplete() (any, bool) })
		if !ok {
			continue
		}
		if it, ok = u.asIncomplete(); !ok {
			continue
		}
		r.resp.Output[i] = it
		r.emit("response.output_item.done", map[string]any{"output_index": i, "item": it})
	}
}
