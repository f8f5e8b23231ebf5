package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/artifact"
	"github.com/cubicle-sandbox/cubicle/internal/kernel"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// Tool is one tool a model may call.
type Tool struct {
	Name        string
	Description string
	// Schema is the strict JSON schema of the arguments: an object with
	// additionalProperties false and every property required (optional ones
	// are nullable), as OpenAI's strict mode demands.
	Schema json.RawMessage
	// Computer marks a tool that needs a computer (the computer capability,
	// the "computer" system tool and an organisation that allows computers).
	Computer bool
	// Kind is the kind of a call's computer.executed event ("": the name
	// without the builtin__computer_ prefix).
	Kind string
	// Loose marks a tool whose schema is not OpenAI's strict subset (an
	// organisation's script): it is offered with strict false.
	Loose bool
	// Run executes the tool. A tool error is the Result's Output; err is
	// only for infrastructure failures.
	Run func(ctx context.Context, env Env, args json.RawMessage) (Result, error)
}

// Limits bound one call; zero values take the defaults.
type Limits struct {
	// ExecTimeout caps a command's or a python call's time (the
	// computer's exec limit).
	ExecTimeout time.Duration
	// MaxStreamBytes is how much of each output stream is read (1 MiB).
	MaxStreamBytes int64
	// MaxAnswerBytes is the size of the answer the model sees (32 KiB).
	MaxAnswerBytes int
	// MaxFileBytes bounds a written file (1 MiB when zero).
	MaxFileBytes int64
	// Prelude runs in every new Python kernel.
	Prelude string
}

// Defaults of Limits.
const (
	DefaultExecTimeout    = sandbox.DefaultTimeout
	DefaultMaxStreamBytes = 1 << 20
	DefaultMaxAnswerBytes = 32 << 10
	DefaultMaxFileBytes   = 1 << 20
)

func (l Limits) withDefaults() Limits {
	if l.ExecTimeout <= 0 {
		l.ExecTimeout = DefaultExecTimeout
	}
	if l.MaxStreamBytes <= 0 {
		l.MaxStreamBytes = DefaultMaxStreamBytes
	}
	if l.MaxAnswerBytes <= 0 {
		l.MaxAnswerBytes = DefaultMaxAnswerBytes
	}
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = DefaultMaxFileBytes
	}
	return l
}

// Exec is the computer's exec limit (ExecTimeout or its default).
func (l Limits) Exec() time.Duration { return l.withDefaults().ExecTimeout }

// CapSeconds is limit brought down to each positive count of whole
// seconds below it (a key's or a request's own, smaller timeout): the one
// place where a timeout counted in seconds at the API meets a
// time.Duration. Zero and negative counts mean "unset".
func CapSeconds(limit time.Duration, seconds ...int) time.Duration {
	for _, n := range seconds {
		if n > 0 && int64(n) <= int64(limit/time.Second) {
			limit = time.Duration(n) * time.Second
		}
	}
	return limit
}

// Computer is what the tools use of a computer: processes (background
// ones for shell tasks), files and Python.
type Computer interface {
	sandbox.Processes
	sandbox.Background
	sandbox.Files
	sandbox.Python
}

// Env is what a tool runs with.
type Env struct {
	Sandbox Computer
	Limits  Limits
	// Artifacts: the key may keep files (the artifacts capability).
	Artifacts bool
	// Export stores the computer's file at path (already resolved) as an
	// artifact of the caller; nil where the deployment has no artifact
	// store. It returns artifact.ErrTooLarge past artifact.MaxBytes and the
	// sandbox's errors for a file it cannot read.
	Export func(ctx context.Context, path string) (artifact.Ref, error)
	// Redact, when set, rewrites every text the computer gives an answer
	// (a command's output, a file's text, Python's outputs) before the
	// answer is formatted and cut to its size, so no datum is cut in two:
	// pii.Redact for a key that redacts personal data (internal/computer
	// sets it).
	Redact func(string) string
}

// untrusted is a text from the computer as an answer may show it.
func (e Env) untrusted(s string) string {
	if e.Redact == nil {
		return s
	}
	return e.Redact(s)
}

// Image is a PNG the tool produced; the model sees only Note.
type Image struct {
	PNG    []byte `json:"png"`
	Width  int    `json:"width"`
	Height int    `json:"height"`
	Note   string `json:"note"`
}

// PythonCell is one cell's structured outputs.
type PythonCell struct {
	Index   int             `json:"index"`
	Status  string          `json:"status"`
	Outputs []kernel.Output `json:"outputs"`
}

// Result is a tool's answer.
type Result struct {
	// Output is the fixed text the model sees.
	Output    string         `json:"output"`
	Images    []Image        `json:"images"`
	Artifacts []artifact.Ref `json:"artifacts"`
	// Cells are python's structured outputs.
	Cells []PythonCell `json:"cells,omitempty"`
	// Logs is python's text without the image placeholders, for
	// code_interpreter's client-visible logs (OpenAI's carry none).
	Logs string `json:"-"`
	// Outputs are code_interpreter's OpenAI-shaped outputs for the client.
	Outputs []CodeOutput `json:"outputs,omitempty"`
	// Failed: Output is an error sentence (the call did not do its job).
	Failed bool `json:"-"`
	// ExitCode is a command's exit code (exec only), for the audit.
	ExitCode *int `json:"-"`
	// TaskID is the shell task exec started (background), for the audit
	// and for the gateway, which keeps the computer for it.
	TaskID string `json:"-"`
	// Err is an infrastructure failure (RunBatch only).
	Err error `json:"-"`
	// Audit are fields the call adds to its computer.executed event (a
	// script's name and version): ids and counts, never arguments or
	// output.
	Audit map[string]any `json:"-"`
}

func failed(format string, args ...any) Result {
	return Result{Output: fmt.Sprintf(format, args...), Failed: true}
}

// Definition is a tool in OpenAI function format.
type Definition struct {
	Type     string   `json:"type"`
	Function Function `json:"function"`
}

// Function is the function part of a Definition.
type Function struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      bool            `json:"strict"`
}

// Definition returns t in OpenAI function format.
func (t *Tool) Definition() Definition {
	return Definition{Type: "function", Function: Function{Name: t.Name, Description: t.Description,
		Parameters: t.Schema, Strict: !t.Loose}}
}

// Registry holds tools by name.
type Registry struct {
	tools []*Tool
}

// NewRegistry returns a registry of tools, in that order.
func NewRegistry(tools ...Tool) *Registry {
	r := &Registry{}
	for i := range tools {
		t := tools[i]
		r.tools = append(r.tools, &t)
	}
	return r
}

// Default is the registry of the built-in tools.
func Default() *Registry {
	return NewRegistry(ExecTool(), WriteFileTool(), ReadFileTool(), PythonTool(), CodeInterpreterTool())
}

// Lookup finds a tool by its exact name.
func (r *Registry) Lookup(name string) (*Tool, bool) {
	for _, t := range r.tools {
		if t.Name == name {
			return t, true
		}
	}
	return nil, false
}

// Match returns the tools a name or toolset pattern names: an exact name,
// or a prefix followed by one final "*" (builtin__computer_*).
func (r *Registry) Match(pattern string) []*Tool {
	prefix, glob := strings.CutSuffix(pattern, "*")
	if strings.Contains(prefix, "*") {
		return nil
	}
	var out []*Tool
	for _, t := range r.tools {
		if (glob && strings.HasPrefix(t.Name, prefix)) || (!glob && t.Name == pattern) {
			out = append(out, t)
		}
	}
	return out
}

// Definitions returns the tools keep accepts (nil: all) in OpenAI
// function format.
func (r *Registry) Definitions(keep func(*Tool) bool) []Definition {
	out := []Definition{}
	for _, t := range r.tools {
		if keep == nil || keep(t) {
			out = append(out, t.Definition())
		}
	}
	return out
}

// Names lists the tool names.
func (r *Registry) Names() []string {
	var out []string
	for _, t := range r.tools {
		out = append(out, t.Name)
	}
	return slices.Clip(out)
}

// UnknownTool is the sentence of a tool name that does not exist.
func UnknownTool(name string) string { return "Unknown tool: " + name }

// Run calls a tool by name. An unknown tool is a tool error.
func (r *Registry) Run(ctx context.Context, env Env, name string, args json.RawMessage) (Result, error) {
	t, ok := r.Lookup(name)
	if !ok {
		return failed("%s", UnknownTool(name)), nil
	}
	return t.Run(ctx, env, args)
}

// Call is one tool call of a round.
type Call struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// ErrNotRun marks a call skipped because an earlier call of its round
// failed for infrastructure reasons.
var ErrNotRun = errors.New("not run: an earlier call of this round failed")

// NotRunSentence is the Output of a call skipped after an infrastructure failure.
const NotRunSentence = "Not run: the computer failed during an earlier call."

// RunBatch runs one round's calls strictly in order, one after another. A
// tool error does not stop the round; an infrastructure failure (Err) does:
// the later calls are not run and carry ErrNotRun.
func (r *Registry) RunBatch(ctx context.Context, env Env, calls []Call) []Result {
	out := make([]Result, len(calls))
	var stop error
	for i, c := range calls {
		if stop != nil {
			out[i] = Result{Output: NotRunSentence, Failed: true, Err: fmt.Errorf("%w: %w", ErrNotRun, stop)}
			continue
		}
		res, err := r.Run(ctx, env, c.Name, c.Arguments)
		if err != nil {
			res.Err, stop = err, err
		}
		out[i] = res.normalize()
	}
	return out
}

// normalize makes the slices non-nil (they are [] on the wire).
func (r Result) normalize() Result {
	if r.Images == nil {
		r.Images = []Image{}
	}
	if r.Artifacts == nil {
		r.Artifacts = []artifact.Ref{}
	}
	return r
}

// Normalize is normalize for callers outside the package.
func (r Result) Normalize() Result { return r.normalize() }

// untrustedOutputs are a cell's outputs as an answer may show them: each
// text untrusted (a JSON output that a redaction leaves invalid becomes
// its redacted text as a JSON string). Images are as they are.
func (e Env) untrustedOutputs(outs []kernel.Output) []kernel.Output {
	if e.Redact == nil {
		return outs
	}
	for i := range outs {
		o := &outs[i]
		o.Text, o.EName, o.EValue = e.Redact(o.Text), e.Redact(o.EName), e.Redact(o.EValue)
		for k, l := range o.Traceback {
			o.Traceback[k] = e.Redact(l)
		}
		if len(o.JSON) > 0 {
			if r := e.Redact(string(o.JSON)); r != string(o.JSON) {
				o.JSON = json.RawMessage(r)
				if !json.Valid(o.JSON) {
					o.JSON, _ = json.Marshal(r)
				}
			}
		}
	}
	return outs
}
