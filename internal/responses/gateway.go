package responses

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/files"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/store"
	"github.com/cubicle-sandbox/cubicle/internal/tools"
)

// Config configures the gateway.
type Config struct {
	// Upstreams are the model servers; a request's model picks one (see
	// UpstreamConfig.Models), else the default one.
	Upstreams []UpstreamConfig
	// UpstreamURL and UpstreamKey are the shorthand for one streamed Chat
	// Completions upstream serving every model, used when Upstreams is
	// empty.
	UpstreamURL string
	UpstreamKey string
	// Model is used when a request names none.
	Model string
	// Timeout bounds one upstream call, streamed answer included (default 300s).
	Timeout time.Duration
	// IdleTimeout bounds the silence of a streamed upstream answer: before
	// its headers and between two reads (default 120s).
	IdleTimeout time.Duration
	// MaxRounds bounds the upstream calls of one response (default 8).
	MaxRounds int
	// MaxUpstreamBytes bounds one upstream answer (default 8 MiB).
	MaxUpstreamBytes int64
	// Client is the HTTP client (default: a fresh one).
	Client *http.Client
	// PublicURL is where clients reach the server (scheme://host[:port]),
	// for absolute artifact URLs; empty: the request's Origin.
	PublicURL string
}

// UpstreamConfig is one upstream model server.
type UpstreamConfig struct {
	Name    string
	BaseURL string // OpenAI-compatible base URL (…/v1)
	Key     string // bearer token; empty: none is sent
	// API is APIChat (POST {base}/chat/completions, the default) or
	// APIResponses (POST {base}/responses).
	API string
	// Models are the model names this upstream serves: exact names or
	// path.Match patterns ("llama3*"). Exact names win over patterns.
	Models []string
	// Default serves the models no upstream names.
	Default bool
	// NoStream asks for whole answers instead of streamed ones (then text
	// reaches a streaming client in one delta per upstream answer).
	NoStream bool
}

// Upstream APIs.
const (
	APIChat      = "chat"
	APIResponses = "responses"
)

// Defaults of Config.
const (
	DefaultTimeout          = 300 * time.Second
	DefaultIdleTimeout      = 120 * time.Second
	DefaultMaxRounds        = 8
	DefaultMaxUpstreamBytes = 8 << 20
)

// Gateway runs Responses requests.
type Gateway struct {
	cfg    Config
	routes routes
	comp   *computer.Manager
	reg    *tools.Registry
	// files copies input_file items into the computer; nil: they are skipped.
	files *files.Service
	// responses keeps finished responses (store: true); nil: nothing is kept.
	responses store.Responses
	// pending are the response computers being deleted (Run.Close).
	pending pendingDeletes
}

// Deps are what the gateway runs on, given at construction.
type Deps struct {
	// Computers run the tools.
	Computers *computer.Manager
	// Files copies a request's input_file items into the response's
	// computer and keeps its images as artifacts; nil: they are skipped.
	Files *files.Service
	// Store keeps finished responses (request field store, default
	// true); nil: nothing is kept.
	Store store.Responses
}

// New returns a gateway running its tools on deps.Computers. A bad
// upstream list (see UpstreamConfig) is an error naming the upstream.
func New(cfg Config, deps Deps) (*Gateway, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.MaxRounds <= 0 {
		cfg.MaxRounds = DefaultMaxRounds
	}
	if cfg.MaxUpstreamBytes <= 0 {
		cfg.MaxUpstreamBytes = DefaultMaxUpstreamBytes
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{}
	}
	rt, err := newRoutes(cfg)
	if err != nil {
		return nil, err
	}
	return &Gateway{cfg: cfg, routes: rt, comp: deps.Computers, files: deps.Files, responses: deps.Store, reg: tools.NewRegistry(tools.CodeInterpreterTool(), tools.ExecTool(),
		tools.WriteFileTool(), tools.ReadFileTool(), tools.PythonTool())}, nil
}

// Response is a Responses API response object.
type Response struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	CreatedAt          int64             `json:"created_at"`
	CompletedAt        *int64            `json:"completed_at"`
	Status             string            `json:"status"`
	Background         bool              `json:"background"`
	IncompleteDetails  *Incomplete       `json:"incomplete_details"`
	Error              any               `json:"error"`
	Model              string            `json:"model"`
	Output             []any             `json:"output"`
	ParallelToolCalls  bool              `json:"parallel_tool_calls"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	Tools              []json.RawMessage `json:"tools"`
	Instructions       *string           `json:"instructions"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Conversation       any               `json:"conversation"`
	Prompt             any               `json:"prompt"`
	MaxToolCalls       *int              `json:"max_tool_calls"`
	MaxOutputTokens    *int64            `json:"max_output_tokens"`
	Temperature        float64           `json:"temperature"`
	TopP               float64           `json:"top_p"`
	TopLogprobs        int               `json:"top_logprobs"`
	Text               Text              `json:"text"`
	Reasoning          Reasoning         `json:"reasoning"`
	Truncation         string            `json:"truncation"`
	ServiceTier        string            `json:"service_tier"`
	User               *string           `json:"user"`
	PromptCacheKey     *string           `json:"prompt_cache_key"`
	// PromptCacheRetention and SafetyIdentifier are echoed from the request.
	PromptCacheRetention *string           `json:"prompt_cache_retention"`
	SafetyIdentifier     *string           `json:"safety_identifier"`
	Store                bool              `json:"store"`
	Metadata             map[string]string `json:"metadata"`
	Usage                Usage             `json:"usage"`
}

// Incomplete says why a response stopped early.
type Incomplete struct {
	Reason string `json:"reason"`
}

// Usage is the upstream usage summed over the rounds.
type Usage struct {
	InputTokens         int            `json:"input_tokens"`
	InputTokensDetails  map[string]int `json:"input_tokens_details"`
	OutputTokens        int            `json:"output_tokens"`
	OutputTokensDetails map[string]int `json:"output_tokens_details"`
	TotalTokens         int            `json:"total_tokens"`
}

// CodeInterpreterCall is a code_interpreter_call output item.
type CodeInterpreterCall struct {
	Type        string              `json:"type"`
	ID          string              `json:"id"`
	Status      string              `json:"status"`
	ContainerID string              `json:"container_id"`
	Code        string              `json:"code"`
	Outputs     *[]tools.CodeOutput `json:"outputs"`
}

// ToolCall is a tool_call output item: one call of a gateway function
// tool (builtin__computer_exec, …_write_file, …_read_file, python) run
// in the response's computer. Output is the text the model saw.
type ToolCall struct {
	Type        string `json:"type"`
	ID          string `json:"id"`
	Status      string `json:"status"`
	ContainerID string `json:"container_id"`
	Name        string `json:"name"`
	Arguments   string `json:"arguments"`
	Output      string `json:"output"`
}

// FunctionCall is a client function_call output item.
type FunctionCall struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Status    string `json:"status"`
}

// Message is an assistant message output item.
type Message struct {
	Type    string       `json:"type"`
	ID      string       `json:"id"`
	Role    string       `json:"role"`
	Status  string       `json:"status"`
	Content []OutputText `json:"content"`
}

// OutputText is a message's text part.
type OutputText struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
}

func newID(prefix string) string {
	b := make([]byte, 12)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// Event is one streaming event: its type and its fields besides type and
// sequence_number.
type Event struct {
	Type   string
	Fields map[string]any
}

// MarshalJSON renders the event as one object: type and the fields
// (sequence_number among them).
func (e Event) MarshalJSON() ([]byte, error) {
	m := map[string]any{"type": e.Type}
	for k, v := range e.Fields {
		m[k] = v
	}
	return json.Marshal(m)
}

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
	// turn is the upstream answer being turned into items (the last one
	// once the loop ended).
	turn *turnOutput
	// origin is Request.Origin.
	origin string
}

// Stream reports whether the request asked for streaming.
func (r *Run) Stream() bool { return r.plan.stream }

// emit sends one event with the next sequence number; a send error (the
// client left) is ignored here: the request context ends the run.
func (r *Run) emit(typ string, fields map[string]any) {
	if r.send == nil {
		return
	}
	if fields == nil {
		fields = map[string]any{}
	}
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
		Model: pl.model, Output: []any{}, ToolChoice: json.RawMessage(`"auto"`), Tools: req.Tools,
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
	resp.PreviousResponseID = req.PreviousResponseID
	req.Params.echo(resp)
	return &Run{g: g, p: p, plan: pl, up: up, resp: resp, started: start, origin: req.Origin}, nil
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
	r.emit("response.in_progress", map[string]any{"response": r.snapshot()})
	if err := r.loop(ctx); err != nil {
		if r.send != nil {
			r.closeUnfinished()
			r.resp.Status = "failed"
			code, msg := "server_error", "The response failed; see the server log."
			var ge *Error
			if errors.As(err, &ge) {
				code, msg = ge.Code, ge.Message
			}
			r.resp.Error = map[string]string{"code": code, "message": msg}
			r.emit("response.failed", map[string]any{"response": r.snapshot()})
			r.keep(ctx)
		}
		return nil, err
	}
	typ := "response.completed"
	if r.resp.Status == "incomplete" {
		typ = "response.incomplete"
	}
	r.resp.CompletedAt = ptr(time.Now().Unix())
	r.keep(ctx)
	r.emit(typ, map[string]any{"response": r.snapshot()})
	return r.resp, nil
}

// keep stores the finished response when it asked to be stored; a
// failure is logged (the response itself is still answered).
func (r *Run) keep(ctx context.Context) {
	if !r.resp.Store || r.g.responses == nil {
		return
	}
	body, err := json.Marshal(r.resp)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		err = r.g.responses.Put(ctx, store.Response{ID: r.resp.ID, OrgID: r.p.Org.ID, KeyID: r.p.Key.ID,
			CreatedAt: time.Unix(r.resp.CreatedAt, 0), Body: body, Conversation: r.conversation(ctx),
			Items: outputItems(r.resp.Output)})
	}
	if err != nil {
		slog.ErrorContext(ctx, "gateway: storing the response failed", "response", r.resp.ID, "err", err)
	}
}

func (r *Run) loop(ctx context.Context) error {
	msgs := r.plan.messages
	defer func() { r.msgs = msgs }()
	for round := 0; round < r.g.cfg.MaxRounds; round++ {
		creq := chatRequest{Model: r.plan.model, Messages: msgs, Tools: r.plan.tools, ToolChoice: r.plan.toolChoice, Params: r.plan.params}
		if len(creq.Tools) > 0 {
			creq.ParallelToolCalls = r.plan.parallel
		}
		limited := r.plan.maxToolCalls > 0 && r.toolCalls >= r.plan.maxToolCalls
		if limited && len(creq.Tools) > 0 {
			creq.ToolChoice = json.RawMessage(`"none"`)
		}
		to := newTurnOutput(ctx, r, !limited)
		r.turn = to
		created := r.timing.Create
		stop := timed(&r.timing.Upstream)
		tu, err := r.up.complete(ctx, creq, to)
		stop()
		// A computer made while the answer streamed is not upstream time.
		r.timing.Upstream -= r.timing.Create - created
		if err == nil {
			err = to.err
		}
		if err != nil {
			return err
		}
		to.finish(tu)
		r.resp.Usage.InputTokens += tu.usage.InputTokens
		r.resp.Usage.OutputTokens += tu.usage.OutputTokens
		r.resp.Usage.TotalTokens += tu.usage.TotalTokens
		if len(tu.calls) == 0 {
			if tu.text != "" {
				msgs = append(msgs, chatMessage{Role: "assistant", Content: ptr(tu.text)})
			}
			r.resp.Status = "completed"
			return nil
		}
		if limited {
			// Gateway calls past the limit are ignored (not run, not
			// shown); the client's calls are output items, so the kept
			// conversation has them too: a continuation's
			// function_call_output then follows its call.
			if turn := r.clientTurn(tu); turn != nil {
				msgs = append(msgs, *turn)
			}
			r.resp.Status = "incomplete"
			r.resp.IncompleteDetails = &Incomplete{Reason: "max_tool_calls"}
			return nil
		}
		// The assistant turn with its calls, then each gateway call's
		// output; client calls are already output items.
		assistant := chatMessage{Role: "assistant", ToolCalls: tu.calls}
		if tu.text != "" {
			assistant.Content = ptr(tu.text)
		}
		at := len(msgs) // where the assistant turn starts
		msgs = append(msgs, assistant)
		clientCalls := false
		for i, tc := range tu.calls {
			var out string
			var err error
			switch {
			case !r.isGatewayCall(tc.Function.Name):
				clientCalls = true
				continue
			case r.plan.maxToolCalls > 0 && r.toolCalls >= r.plan.maxToolCalls:
				out = r.skipCall(to.code(i))
			case tc.Function.Name == tools.CodeInterpreterName:
				out, err = r.codeInterpreter(ctx, tc, to.code(i))
			default:
				out, err = r.gatewayTool(ctx, tc)
			}
			if err != nil {
				return err
			}
			msgs = append(msgs, chatMessage{Role: "tool", ToolCallID: tc.ID, Content: ptr(out)})
		}
		if r.note != "" {
			note := chatMessage{Role: "system", Content: ptr(r.note)}
			if clientCalls {
				// The client's outputs come in a later request, right
				// after the calls: the note goes before the turn.
				msgs = slices.Insert(msgs, at, note)
			} else {
				msgs = append(msgs, note)
			}
			r.note = ""
		}
		if clientCalls {
			r.resp.Status = "completed"
			return nil
		}
	}
	r.resp.Status = "incomplete"
	r.resp.IncompleteDetails = &Incomplete{Reason: "max_rounds"}
	return nil
}

// NotRunOutput is what the model sees for a gateway call past the
// request's max_tool_calls, made in the same answer as the calls before it.
const NotRunOutput = "This call was not run: the response reached its max_tool_calls limit."

// skipCall ignores a gateway call past max_tool_calls: it does not run; a
// code_interpreter_call item already shown while its code streamed ends
// incomplete. It returns what the model sees.
func (r *Run) skipCall(streamed *openCode) string {
	if streamed != nil {
		item := r.resp.Output[streamed.idx].(CodeInterpreterCall)
		item.Status = "incomplete"
		r.resp.Output[streamed.idx] = item
		r.emit("response.output_item.done", map[string]any{"output_index": streamed.idx, "item": item})
	}
	return NotRunOutput
}

// clientTurn is the assistant turn of tu as the client saw it: its text
// and its client function calls, without the gateway's (nil: neither).
func (r *Run) clientTurn(tu *turn) *chatMessage {
	m := chatMessage{Role: "assistant"}
	for _, tc := range tu.calls {
		if !r.isGatewayCall(tc.Function.Name) {
			m.ToolCalls = append(m.ToolCalls, tc)
		}
	}
	if tu.text != "" {
		m.Content = ptr(tu.text)
	}
	if m.Content == nil && len(m.ToolCalls) == 0 {
		return nil
	}
	return &m
}

// codeInterpreter runs one call in the response's computer (created at the
// first call) and returns what the model sees. streamed is its item when
// the code was streamed while the answer arrived (nil: it is added now,
// its code in one delta).
func (r *Run) codeInterpreter(ctx context.Context, tc chatToolCall, streamed *openCode) (string, error) {
	r.toolCalls++
	item := CodeInterpreterCall{Type: "code_interpreter_call", ID: newID("ci_"), Status: "completed"}
	var a struct {
		Code string `json:"code"`
	}
	if json.Unmarshal([]byte(tc.Function.Arguments), &a) != nil {
		// The tool answers the model with its own argument error below.
		a.Code = ""
	}
	item.Code = a.Code
	if err := r.ensureComputer(ctx); err != nil {
		return "", err
	}
	item.ContainerID = r.computerID
	idx := len(r.resp.Output)
	if streamed != nil { // added, and its code sent, while the answer streamed
		idx, item.ID = streamed.idx, streamed.item.ID
	}
	added := item
	added.Status, added.Code = "in_progress", ""
	at := func(extra ...any) map[string]any {
		m := map[string]any{"item_id": item.ID, "output_index": idx}
		for i := 0; i+1 < len(extra); i += 2 {
			m[extra[i].(string)] = extra[i+1]
		}
		return m
	}
	if streamed == nil {
		r.emit("response.output_item.added", map[string]any{"output_index": idx, "item": added})
		r.emit("response.code_interpreter_call.in_progress", at())
		r.emit("response.code_interpreter_call_code.delta", at("delta", item.Code))
		r.emit("response.code_interpreter_call_code.done", at("code", item.Code))
		added.Code = item.Code
		r.resp.Output = append(r.resp.Output, added) // until it ran
	}
	r.emit("response.code_interpreter_call.interpreting", at())
	args := json.RawMessage(tc.Function.Arguments)
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	stop := timed(&r.timing.Tools)
	res, err := r.g.comp.RunTool(ctx, r.p, r.computerID, r.g.reg, tools.CodeInterpreterName, args)
	stop()
	if err != nil {
		return "", err
	}
	if res.Failed {
		item.Status = "failed"
	}
	if r.plan.includeOutputs {
		outs := res.Outputs
		if outs == nil {
			outs = []tools.CodeOutput{}
		}
		r.imagesAsArtifacts(ctx, item.ID, outs)
		item.Outputs = &outs
	}
	r.resp.Output[idx] = item
	r.emit("response.code_interpreter_call.completed", at())
	r.emit("response.output_item.done", map[string]any{"output_index": idx, "item": item})
	return res.Output, nil
}

// ensureComputer creates the response's computer at its first call and
// copies the request's input files into it.
func (r *Run) ensureComputer(ctx context.Context) error {
	if r.computerID != "" {
		return nil
	}
	defer timed(&r.timing.Create)()
	v, err := r.g.comp.Create(ctx, r.p, computer.CreateRequest{ResponseID: r.resp.ID})
	if err != nil {
		return fmt.Errorf("gateway: create the response's computer: %w", err)
	}
	r.computerID = v.ID
	in := files.InputsRequest{FileIDs: r.plan.fileIDs}
	if prev := r.plan.previous; prev != nil {
		in.FileIDs, in.ArtifactIDs = newestFirst(in.FileIDs, prev.FileIDs), prev.ArtifactIDs
	}
	if len(in.FileIDs)+len(in.ArtifactIDs) == 0 || r.g.files == nil {
		return nil
	}
	svc, p := r.g.files, r.p
	err = r.g.comp.WithSandbox(ctx, p, r.computerID, func(sb sandbox.Sandbox) error {
		rep, err := svc.CopyInputs(ctx, p, sb, in)
		r.note = inputsNote(rep)
		return err
	})
	if err != nil {
		return fmt.Errorf("gateway: copy the input files: %w", err)
	}
	return nil
}

// gatewayTool runs one call of a gateway function tool in the response's
// computer, adds its tool_call item and returns what the model sees.
func (r *Run) gatewayTool(ctx context.Context, tc chatToolCall) (string, error) {
	r.toolCalls++
	if err := r.ensureComputer(ctx); err != nil {
		return "", err
	}
	item := ToolCall{Type: "tool_call", ID: newID("tc_"), Status: "in_progress", ContainerID: r.computerID,
		Name: tc.Function.Name, Arguments: tc.Function.Arguments}
	idx := len(r.resp.Output)
	r.resp.Output = append(r.resp.Output, item) // until it ran
	r.emit("response.output_item.added", map[string]any{"output_index": idx, "item": item})
	args := json.RawMessage(tc.Function.Arguments)
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	stop := timed(&r.timing.Tools)
	res, err := r.g.comp.RunTool(ctx, r.p, r.computerID, r.g.reg, tc.Function.Name, args)
	stop()
	if err != nil {
		return "", err
	}
	item.Status, item.Output = "completed", res.Output
	if res.Failed {
		item.Status = "failed"
	}
	r.resp.Output[idx] = item
	r.emit("response.output_item.done", map[string]any{"output_index": idx, "item": item})
	return res.Output, nil
}

// incomplete marks an in-progress status "incomplete" (false: it was not
// in progress).
func incomplete(status *string) bool {
	if *status != "in_progress" {
		return false
	}
	*status = "incomplete"
	return true
}

// asIncomplete is the item marked incomplete, if it was in progress.
func (m Message) asIncomplete() (any, bool) {
	ok := incomplete(&m.Status)
	return m, ok
}

func (c FunctionCall) asIncomplete() (any, bool) {
	ok := incomplete(&c.Status)
	return c, ok
}

func (c CodeInterpreterCall) asIncomplete() (any, bool) {
	ok := incomplete(&c.Status)
	return c, ok
}

func (c ToolCall) asIncomplete() (any, bool) {
	ok := incomplete(&c.Status)
	return c, ok
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

// InputsNotePrefix starts the system note listing the copied input files;
// ArtifactsNotePrefix the part listing the conversation's earlier artifacts.
const (
	InputsNotePrefix    = "The user's input files are in the computer at: "
	ArtifactsNotePrefix = "Files made earlier in this conversation are in the computer at: "
)

// inputsNote is the system note for the copied files ("": none copied).
func inputsNote(rep files.InputsReport) string {
	var inputs, artifacts []string
	for _, c := range rep.Copied {
		if strings.HasPrefix(c.Path, files.ArtifactsDir+"/") {
			artifacts = append(artifacts, c.Path)
		} else {
			inputs = append(inputs, c.Path)
		}
	}
	var note []string
	if len(inputs) > 0 {
		note = append(note, InputsNotePrefix+strings.Join(inputs, ", "))
	}
	if len(artifacts) > 0 {
		note = append(note, ArtifactsNotePrefix+strings.Join(artifacts, ", ")+
			" (Python variables from earlier responses are gone: reload what you need)")
	}
	return strings.Join(note, "\n")
}

// ArtifactURL is the URL of an artifact's content under base (the
// server's public URL).
func ArtifactURL(base, id string) string {
	return strings.TrimSuffix(base, "/") + "/v1/artifacts/" + id + "/content"
}

// baseURL is where the client reaches the server: the configured public
// URL, else the request's origin.
func (r *Run) baseURL() string {
	if r.g.cfg.PublicURL != "" {
		return r.g.cfg.PublicURL
	}
	return r.origin
}

// imagesAsArtifacts keeps each PNG image output as an artifact of the
// response's computer and points its url at the artifact's content, when
// the key has the artifacts capability and files are wired. Otherwise, or
// if keeping one fails (logged), the image stays a data URL.
func (r *Run) imagesAsArtifacts(ctx context.Context, itemID string, outs []tools.CodeOutput) {
	if r.g.files == nil || !r.p.Caps.HasArtifacts() {
		return
	}
	const prefix = "data:image/png;base64,"
	n := 0
	for i := range outs {
		o := &outs[i]
		if o.Type != "image" || !strings.HasPrefix(o.URL, prefix) {
			continue
		}
		png, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(o.URL, prefix))
		if err != nil {
			continue
		}
		n++
		a, err := r.g.files.SaveImage(ctx, r.p, r.computerID, fmt.Sprintf("%s-%d.png", itemID, n), png)
		if err != nil {
			slog.WarnContext(ctx, "gateway: keeping an image as an artifact failed; sending a data URL",
				"response", r.resp.ID, "err", err)
			continue
		}
		o.URL = ArtifactURL(r.baseURL(), a.ID)
	}
}
