package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/cubicle-sandbox/cubicle/internal/tools"
)

// Request is the supported subset of a Responses API request. Decode it
// strictly (unknown fields are errors), then call Validate.
type Request struct {
	Model        string            `json:"model"`
	Input        json.RawMessage   `json:"input"`
	Instructions *string           `json:"instructions"`
	Tools        []json.RawMessage `json:"tools"`
	ToolChoice   json.RawMessage   `json:"tool_choice"`
	MaxToolCalls *int              `json:"max_tool_calls"`
	// ParallelToolCalls is echoed and passed to the upstream; gateway
	// tools always run one after another in model order.
	ParallelToolCalls *bool             `json:"parallel_tool_calls"`
	Stream            *bool             `json:"stream"`
	Store             *bool             `json:"store"`
	Metadata          map[string]string `json:"metadata"`
	Include           []string          `json:"include"`
}

// IncludeOutputs is the include value that returns code_interpreter_call outputs.
const IncludeOutputs = "code_interpreter_call.outputs"

// plan is a validated request, ready for the upstream.
type plan struct {
	model           string
	messages        []chatMessage
	tools           []chatTool
	toolChoice      json.RawMessage
	codeInterpreter bool            // the gateway's code_interpreter is offered
	clientFuncs     map[string]bool // client function names
	gatewayTools    map[string]bool // gateway function tools (builtin__computer_*, python)
	fileIDs         []string        // input_file ids of the input, in order, deduplicated
	parallel        *bool
	maxToolCalls    int // 0: unlimited
	includeOutputs  bool
	metadata        map[string]string
	stream          bool
}

// strict decodes raw into v, refusing unknown fields; the error names
// param + "." + the field.
func strict(raw json.RawMessage, v any, param string) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		msg := err.Error()
		if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
			f = strings.Trim(f, `"`)
			return invalid(param+"."+f, "unknown or unsupported field %s.%s", param, f)
		}
		var te *json.UnmarshalTypeError
		if ok := asType(err, &te); ok && te.Field != "" {
			return invalid(param+"."+te.Field, "%s.%s must be %s", param, te.Field, te.Type)
		}
		return invalid(param, "%s is malformed: %v", param, err)
	}
	return nil
}

func asType(err error, te **json.UnmarshalTypeError) bool {
	t, ok := err.(*json.UnmarshalTypeError)
	if ok {
		*te = t
	}
	return ok
}

// validate checks r and builds the upstream plan. computers reports
// whether the caller may use computer tools; it is checked before any
// upstream call.
func (r *Request) validate(defaultModel string, computers bool) (*plan, error) {
	p := &plan{model: r.Model, clientFuncs: map[string]bool{}, gatewayTools: map[string]bool{}, parallel: r.ParallelToolCalls, metadata: r.Metadata, stream: r.Stream != nil && *r.Stream}
	if p.model == "" {
		p.model = defaultModel
	}
	if p.model == "" {
		return nil, invalid("model", "model is required (this deployment has no default model)")
	}
	if len(r.Metadata) > 16 {
		return nil, invalid("metadata", "metadata holds at most 16 keys")
	}
	for k, v := range r.Metadata {
		if len(k) > 64 || len(v) > 512 {
			return nil, invalid("metadata", "metadata keys are at most 64 characters and values 512")
		}
	}
	for i, inc := range r.Include {
		if inc != IncludeOutputs {
			return nil, invalid(fmt.Sprintf("include[%d]", i), "unsupported include %q; only %q is supported", inc, IncludeOutputs)
		}
		p.includeOutputs = true
	}
	if r.MaxToolCalls != nil {
		if *r.MaxToolCalls < 1 {
			return nil, invalid("max_tool_calls", "max_tool_calls must be at least 1")
		}
		p.maxToolCalls = *r.MaxToolCalls
	}
	if err := p.parseTools(r.Tools); err != nil {
		return nil, err
	}
	if (p.codeInterpreter || len(p.gatewayTools) > 0) && !computers {
		return nil, &Error{Status: 400, Code: "computer_not_configured", Message: NotConfiguredSentence, Param: "tools"}
	}
	if err := p.parseToolChoice(r.ToolChoice); err != nil {
		return nil, err
	}
	if r.Instructions != nil && *r.Instructions != "" {
		p.messages = append(p.messages, chatMessage{Role: "system", Content: ptr(*r.Instructions)})
	}
	msgs, fileIDs, err := parseInput(r.Input)
	if err != nil {
		return nil, err
	}
	p.messages = append(p.messages, msgs...)
	p.fileIDs = fileIDs
	return p, nil
}

func ptr[T any](v T) *T { return &v }

func (p *plan) parseTools(raw []json.RawMessage) error {
	for i, t := range raw {
		param := fmt.Sprintf("tools[%d]", i)
		var head struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(t, &head); err != nil {
			return invalid(param, "%s must be an object with a type", param)
		}
		switch head.Type {
		case "code_interpreter":
			var ci struct {
				Type      string          `json:"type"`
				Container json.RawMessage `json:"container"`
			}
			if err := strict(t, &ci, param); err != nil {
				return err
			}
			var c struct {
				Type string `json:"type"`
			}
			if len(ci.Container) == 0 || strict(ci.Container, &c, param+".container") != nil || c.Type != "auto" {
				return invalid(param+".container", `only {"type":"auto"} is supported as the code_interpreter container`)
			}
			if p.codeInterpreter {
				return invalid(param, "code_interpreter is declared twice")
			}
			p.codeInterpreter = true
			ciTool := tools.CodeInterpreterTool()
			def := ciTool.Definition()
			p.tools = append(p.tools, chatTool{Type: "function", Function: chatFunction{Name: def.Function.Name,
				Description: def.Function.Description, Parameters: def.Function.Parameters, Strict: ptr(true)}})
		case "tool":
			var gt struct {
				Type string `json:"type"`
				Name string `json:"name"`
			}
			if err := strict(t, &gt, param); err != nil {
				return err
			}
			matched := gatewayToolset.Match(gt.Name)
			if len(matched) == 0 {
				return invalid(param+".name", "unknown gateway tool %q; supported: %s, the toolset builtin__computer_*",
					gt.Name, strings.Join(gatewayToolset.Names(), ", "))
			}
			for _, tl := range matched {
				if p.gatewayTools[tl.Name] {
					continue // named twice (e.g. exactly and by the toolset): offered once
				}
				p.gatewayTools[tl.Name] = true
				def := tl.Definition()
				p.tools = append(p.tools, chatTool{Type: "function", Function: chatFunction{Name: def.Function.Name,
					Description: def.Function.Description, Parameters: def.Function.Parameters, Strict: ptr(true)}})
			}
		case "function":
			var f struct {
				Type        string          `json:"type"`
				Name        string          `json:"name"`
				Description *string         `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
				Strict      *bool           `json:"strict"`
			}
			if err := strict(t, &f, param); err != nil {
				return err
			}
			if f.Name == "" {
				return invalid(param+".name", "a function tool needs a name")
			}
			if p.clientFuncs[f.Name] {
				return invalid(param+".name", "function %q is declared twice", f.Name)
			}
			p.clientFuncs[f.Name] = true
			ft := chatFunction{Name: f.Name, Parameters: f.Parameters, Strict: f.Strict}
			if f.Description != nil {
				ft.Description = *f.Description
			}
			p.tools = append(p.tools, chatTool{Type: "function", Function: ft})
		default:
			return invalid(param+".type", "unsupported tool type %q; supported: code_interpreter, tool, function", head.Type)
		}
	}
	if p.codeInterpreter && p.clientFuncs[tools.CodeInterpreterName] {
		return invalid("tools", "the function name %q collides with the gateway's code_interpreter tool", tools.CodeInterpreterName)
	}
	for name := range p.gatewayTools {
		if p.clientFuncs[name] {
			return invalid("tools", "the function name %q collides with the gateway tool of that name", name)
		}
	}
	return nil
}

// gatewayToolset holds the gateway's function tools a request may name
// with {"type":"tool","name":…}: the computer tools and python (not
// code_interpreter, which has its own tool type).
var gatewayToolset = tools.NewRegistry(tools.ExecTool(), tools.WriteFileTool(), tools.ReadFileTool(), tools.PythonTool())

func (p *plan) parseToolChoice(raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "auto", "none", "required":
			p.toolChoice = raw
			return nil
		}
		return invalid("tool_choice", "tool_choice must be auto, none, required or a function")
	}
	var c struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if err := strict(raw, &c, "tool_choice"); err != nil {
		return err
	}
	switch {
	case c.Type == "code_interpreter" && p.codeInterpreter:
		c.Name = tools.CodeInterpreterName
	case c.Type == "function" && (p.clientFuncs[c.Name] || p.gatewayTools[c.Name]):
	default:
		return invalid("tool_choice", "tool_choice must name a declared tool")
	}
	p.toolChoice, _ = json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": c.Name}})
	return nil
}

// inputItem is one item of an input array.
type inputItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	// function_call and function_call_output items
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Output    string `json:"output"`
	Status    string `json:"status"`
}

func parseInput(raw json.RawMessage) ([]chatMessage, []string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil, invalid("input", "input is required")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []chatMessage{{Role: "user", Content: ptr(s)}}, nil, nil
	}
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return nil, nil, invalid("input", "input must be a string or an array of items")
	}
	var out []chatMessage
	var fileIDs []string
	for i, it := range items {
		param := fmt.Sprintf("input[%d]", i)
		var item inputItem
		if err := strict(it, &item, param); err != nil {
			return nil, nil, err
		}
		switch item.Type {
		case "", "message":
			switch item.Role {
			case "user", "system", "developer", "assistant":
			default:
				return nil, nil, invalid(param+".role", "role must be user, system, developer or assistant")
			}
			text, ids, err := contentText(item.Content, param+".content")
			if err != nil {
				return nil, nil, err
			}
			for _, id := range ids {
				if !slices.Contains(fileIDs, id) {
					fileIDs = append(fileIDs, id)
				}
			}
			role := item.Role
			if role == "developer" {
				role = "system"
			}
			out = append(out, chatMessage{Role: role, Content: ptr(text)})
		case "function_call":
			if item.CallID == "" || item.Name == "" {
				return nil, nil, invalid(param, "a function_call item needs call_id and name")
			}
			out = append(out, chatMessage{Role: "assistant", ToolCalls: []chatToolCall{{ID: item.CallID, Type: "function",
				Function: chatCallFunction{Name: item.Name, Arguments: item.Arguments}}}})
		case "function_call_output":
			if item.CallID == "" {
				return nil, nil, invalid(param+".call_id", "a function_call_output item needs call_id")
			}
			out = append(out, chatMessage{Role: "tool", ToolCallID: item.CallID, Content: ptr(item.Output)})
		default:
			return nil, nil, invalid(param+".type", "unsupported input item type %q", item.Type)
		}
	}
	if len(out) == 0 {
		return nil, nil, invalid("input", "input must not be empty")
	}
	return out, fileIDs, nil
}

// contentText is a message's text and the file ids of its input_file parts.
func contentText(raw json.RawMessage, param string) (string, []string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil, nil
	}
	var parts []json.RawMessage
	if json.Unmarshal(raw, &parts) != nil {
		return "", nil, invalid(param, "content must be a string or an array of parts")
	}
	var b strings.Builder
	var ids []string
	for i, pr := range parts {
		pp := fmt.Sprintf("%s[%d]", param, i)
		var part struct {
			Type   string `json:"type"`
			Text   string `json:"text"`
			FileID string `json:"file_id"`
		}
		if err := strict(pr, &part, pp); err != nil {
			return "", nil, err
		}
		switch part.Type {
		case "input_text", "output_text":
			if part.FileID != "" {
				return "", nil, invalid(pp+".file_id", "file_id belongs to input_file parts")
			}
		case "input_file":
			if part.FileID == "" || part.Text != "" {
				return "", nil, invalid(pp, `an input_file part needs file_id (and only file_id): {"type":"input_file","file_id":"file_…"}`)
			}
			ids = append(ids, part.FileID)
			continue
		default:
			return "", nil, invalid(pp+".type", "unsupported content part %q; supported: input_text, input_file", part.Type)
		}
		b.WriteString(part.Text)
	}
	return b.String(), ids, nil
}
