package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/tools"
)

// MCP tool names.
const (
	CreateComputer = "create_computer"
	ListComputers  = "list_computers"
	DeleteComputer = "delete_computer"
	Exec           = "exec"
	WriteFile      = "write_file"
	ReadFile       = "read_file"
	ListFiles      = "list_files"
	Python         = "python"
	ExtendComputer = "extend_computer"
	ListTemplates  = "list_templates"
)

// tool is an MCP tool and its body.
type tool struct {
	def *sdk.Tool
	run run
}

// computerID is the argument every tool on one computer takes.
const computerIDSchema = `{"type":"string","description":"The computer's id (cmp_…), from create_computer or list_computers."}`

// tools are the MCP tools (tools/list shows them sorted by name).
func (s *Server) tools() []tool {
	return []tool{
		{&sdk.Tool{Name: CreateComputer, Title: "Create a computer",
			Description: "Create a new, isolated Linux computer (a shell, /workspace for files, Python 3 with numpy, pandas and matplotlib) and return its id and limits. " +
				"Every argument is optional: limits larger than the key's or the deployment's are brought down to them. " +
				"The computer ends at the end of its lifetime; delete it with delete_computer when done.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{` +
				`"memory_mb":{"type":"integer","minimum":0,"description":"Memory limit in MiB (default: the deployment's, 512)."},` +
				`"lifetime_seconds":{"type":"integer","minimum":0,"description":"How long the computer lives before it is destroyed (default: the deployment's)."},` +
				`"idle_timeout_seconds":{"type":"integer","minimum":0,"description":"End the computer this long after the last call on it (default: never; within its lifetime)."},` +
				`"exec_timeout_seconds":{"type":"integer","minimum":0,"description":"The longest a command or a python call may run (default: the deployment's)."},` +
				`"template":{"type":"string","description":"The template (root filesystem) to make it from; default: the deployment's."},` +
				`"network_policy":{"type":"object","description":"Internet for the computer: {\"type\":\"allowlist\",\"allowed_domains\":[\"pypi.org\"]} lets it reach those domains (within what the deployment, organisation and key allow); {\"type\":\"disabled\"} or leaving it out: loopback only (unless the deployment gives every computer internet). The organisation's domain secrets apply; none are given here.",` +
				`"properties":{"type":{"type":"string","enum":["disabled","allowlist"]},` +
				`"allowed_domains":{"type":"array","items":{"type":"string"},"description":"Domains it may reach, e.g. pypi.org."},` +
				`"allowed_cidrs":{"type":"array","items":{"type":"string"},"description":"Networks it may reach by IP address, e.g. 203.0.113.0/24."}},` +
				`"required":["type"],"additionalProperties":false},` +
				`"metadata":{"type":"object","additionalProperties":{"type":"string"},"description":"Labels of your own, kept with the computer."}},` +
				`"additionalProperties":false}`),
			Annotations: &sdk.ToolAnnotations{OpenWorldHint: ptr(false)}}, s.createComputer},
		{&sdk.Tool{Name: ListComputers, Title: "List computers",
			Description: "List the computers of your organisation: id, status, template, limits and expiry. Only live ones unless all is true.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{` +
				`"all":{"type":"boolean","description":"Include computers that have ended (default false)."}},"additionalProperties":false}`),
			Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)}}, s.listComputers},
		{&sdk.Tool{Name: ExtendComputer, Title: "Extend a computer's life",
			Description: "Set a computer's remaining lifetime: it now ends lifetime_seconds from now (brought down to the key's or the deployment's longest lifetime). Use it before a long task on a computer that would end too soon.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"computer_id":` + computerIDSchema + `,` +
				`"lifetime_seconds":{"type":"integer","minimum":1,"description":"How long from now the computer lives."}},` +
				`"required":["computer_id","lifetime_seconds"],"additionalProperties":false}`),
			Annotations: &sdk.ToolAnnotations{IdempotentHint: true, OpenWorldHint: ptr(false)}}, s.extendComputer},
		{&sdk.Tool{Name: ListTemplates, Title: "List templates",
			Description: "List the templates computers can be made from (create_computer's template): each one's name, whether its computers run Python cells, whether it is the default, and what it asks of its computers.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`),
			Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)}}, s.listTemplates},
		{&sdk.Tool{Name: DeleteComputer, Title: "Delete a computer",
			Description: "Destroy a computer and everything in it (its processes, files and Python state). It cannot be undone.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"computer_id":` + computerIDSchema + `},` +
				`"required":["computer_id"],"additionalProperties":false}`),
			Annotations: &sdk.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(false)}}, s.deleteComputer},
		s.delegated(Exec, tools.ExecName, "Run a shell command",
			"Run a shell command (/bin/sh -c) in the computer, in /workspace, as an unprivileged user, and return its exit code, stdout and stderr "+
				"(each stream read up to the deployment's limit, the answer cut at 32 KiB). A command still running at its time limit is killed. "+
				"With background true the command starts as a shell task (a background process, no time limit unless timeout_seconds) and the answer is its task_id at once; "+
				"exec with task_id instead of command answers the task's status and newest output, waiting up to timeout_seconds for it to end.",
			&sdk.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(false)}),
		s.delegated(WriteFile, tools.WriteFileName, "Write a file",
			"Write a text file in the computer, replacing it if it exists; parent directories are created. Relative paths resolve under /workspace, and a path outside /workspace is refused.",
			&sdk.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)}),
		s.delegated(ReadFile, tools.ReadFileName, "Read a file",
			"Read a text file from the computer (cut at 32 KiB; a binary file is reported, not shown). Relative paths resolve under /workspace. "+
				"With export true the file is kept as an artifact of your organisation instead (keys with the artifacts capability).",
			&sdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)}),
		{&sdk.Tool{Name: ListFiles, Title: "List files",
			Description: "List a directory of the computer: each entry's type, size and absolute path. Relative paths resolve under /workspace; the default is /workspace itself.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"computer_id":` + computerIDSchema + `,` +
				`"path":{"type":"string","description":"The directory; default /workspace."}},` +
				`"required":["computer_id"],"additionalProperties":false}`),
			Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)}}, s.listFiles},
		s.delegated(Python, tools.PythonName, "Run Python cells",
			"Run Python cells, in order, in the computer's Jupyter kernel (numpy as np, pandas as pd and matplotlib inline are ready); variables persist between calls. "+
				"Returns printed output, results and errors as text, and each image a cell shows (a matplotlib figure, say) as an image. The first failing cell stops the rest.",
			&sdk.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(false)}),
	}
}

func ptr[T any](v T) *T { return &v }

// delegated is the MCP tool of internal/tools' tool name: its arguments
// plus computer_id, run on that computer by computer.Manager.RunTool.
func (s *Server) delegated(name, toolName, title, desc string, ann *sdk.ToolAnnotations) tool {
	t, ok := s.reg.Lookup(toolName)
	if !ok {
		panic("mcp: no tool " + toolName)
	}
	ann.Title = title
	def := &sdk.Tool{Name: name, Title: title, Description: desc, InputSchema: inputSchema(t.Schema), Annotations: ann}
	return tool{def, s.onComputer(toolName, s.reg)}
}

// onComputer runs reg's tool toolName with a call's arguments but
// computer_id on the computer computer_id names.
func (s *Server) onComputer(toolName string, reg *tools.Registry) run {
	return func(ctx context.Context, p governance.Principal, args json.RawMessage) (*sdk.CallToolResult, error) {
		id, rest, msg := splitComputerID(args)
		if msg != "" {
			return failedResult(msg), nil
		}
		res, err := s.comp.RunTool(ctx, p, id, reg, toolName, rest)
		if err != nil {
			return nil, err
		}
		return toolResult(res), nil
	}
}

// splitComputerID takes computer_id out of a delegated tool's arguments;
// the rest go to the tool, which checks them. msg is the sentence of
// arguments without a usable computer_id.
func splitComputerID(args json.RawMessage) (id string, rest json.RawMessage, msg string) {
	if msg := tools.DuplicateKeys(args); msg != "" {
		return "", nil, msg // the map below would keep the last
	}
	var fields map[string]json.RawMessage
	if len(args) > 0 && json.Unmarshal(args, &fields) != nil {
		return "", nil, tools.DecodeArgs(args, &struct{}{})
	}
	var a struct {
		ComputerID *string `json:"computer_id"`
	}
	raw, ok := fields["computer_id"]
	if !ok {
		raw = json.RawMessage("null")
	}
	if msg := tools.DecodeArgs(json.RawMessage(`{"computer_id":`+string(raw)+`}`), &a, "computer_id"); msg != "" {
		return "", nil, msg
	}
	delete(fields, "computer_id")
	if fields == nil {
		fields = map[string]json.RawMessage{}
	}
	rest, _ = json.Marshal(fields)
	return *a.ComputerID, rest, ""
}

// inputSchema is the MCP input schema of a tool of internal/tools: its
// strict schema (OpenAI's: every property required, optional ones
// nullable) with computer_id added, and the nullable properties no longer
// required, so a client may leave them out.
func inputSchema(strict json.RawMessage) json.RawMessage {
	var s map[string]any
	if err := json.Unmarshal(strict, &s); err != nil {
		panic("mcp: a tool's schema is not JSON: " + err.Error())
	}
	optionalNullable(s)
	b, _ := json.Marshal(withComputerID(s))
	return b
}

// withComputerID adds computer_id to object schema s as its first
// required property.
func withComputerID(s map[string]any) map[string]any {
	props, _ := s["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
	}
	var id map[string]any
	json.Unmarshal([]byte(computerIDSchema), &id)
	props["computer_id"] = id
	s["properties"] = props
	req, _ := s["required"].([]any)
	s["required"] = append([]any{"computer_id"}, req...)
	return s
}

// optionalNullable drops the nullable properties of object schema s (and
// of the objects within it) from its required list.
func optionalNullable(s map[string]any) {
	props, _ := s["properties"].(map[string]any)
	if req, ok := s["required"].([]any); ok {
		keep := []any{}
		for _, name := range req {
			p, _ := props[fmt.Sprint(name)].(map[string]any)
			if !nullable(p) {
				keep = append(keep, name)
			}
		}
		s["required"] = keep
	}
	for _, p := range props {
		if m, ok := p.(map[string]any); ok {
			optionalNullable(m)
		}
	}
	if items, ok := s["items"].(map[string]any); ok {
		optionalNullable(items)
	}
}

func nullable(p map[string]any) bool {
	types, _ := p["type"].([]any)
	for _, t := range types {
		if t == "null" {
			return true
		}
	}
	return false
}

// failedResult is a tool error sentence.
func failedResult(msg string) *sdk.CallToolResult {
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: msg}}}
}

// toolResult is a tool's answer: its text (the model's, exactly as the
// REST tool endpoint's output), then each image as image content; a tool
// error is isError. Artifacts (read_file's export) are structured content.
func toolResult(r tools.Result) *sdk.CallToolResult {
	out := &sdk.CallToolResult{IsError: r.Failed, Content: []sdk.Content{&sdk.TextContent{Text: r.Output}}}
	for _, img := range r.Images {
		out.Content = append(out.Content, &sdk.ImageContent{Data: img.PNG, MIMEType: "image/png"})
	}
	if len(r.Artifacts) > 0 {
		out.StructuredContent = map[string]any{"artifacts": r.Artifacts}
	}
	return out
}

// createArgs are create_computer's arguments.
type createArgs struct {
	MemoryMB           *int64            `json:"memory_mb"`
	LifetimeSeconds    *int              `json:"lifetime_seconds"`
	IdleTimeoutSeconds *int              `json:"idle_timeout_seconds"`
	ExecTimeoutSeconds *int              `json:"exec_timeout_seconds"`
	Template           *string           `json:"template"`
	Metadata           map[string]string `json:"metadata"`
	NetworkPolicy      *networkPolicy    `json:"network_policy"`
}

// networkPolicy is create_computer's network_policy: the REST API's
// without domain_secrets (a secret never passes through a model's
// arguments; the organisation's secrets apply).
type networkPolicy struct {
	Type           string   `json:"type"`
	AllowedDomains []string `json:"allowed_domains"`
	AllowedCIDRs   []string `json:"allowed_cidrs"`
}

// request is the policy as the computers service takes it (nil: none).
func (n *networkPolicy) request() *computer.NetworkPolicy {
	if n == nil {
		return nil
	}
	return &computer.NetworkPolicy{Type: n.Type, AllowedDomains: n.AllowedDomains, AllowedCIDRs: n.AllowedCIDRs}
}

func seconds(n *int) time.Duration {
	if n == nil {
		return 0
	}
	return time.Duration(*n) * time.Second
}

func deref[T any](v *T) T {
	var zero T
	if v == nil {
		return zero
	}
	return *v
}

func (s *Server) createComputer(ctx context.Context, p governance.Principal, args json.RawMessage) (*sdk.CallToolResult, error) {
	var a createArgs
	if msg := tools.DecodeArgs(args, &a); msg != "" {
		return failedResult(msg), nil
	}
	v, err := s.comp.Create(ctx, p, computer.CreateRequest{MemoryMB: deref(a.MemoryMB), Lifetime: seconds(a.LifetimeSeconds),
		IdleTimeout: seconds(a.IdleTimeoutSeconds), ExecTimeout: seconds(a.ExecTimeoutSeconds),
		Template: deref(a.Template), Metadata: a.Metadata, NetworkPolicy: a.NetworkPolicy.request()})
	if err != nil {
		return nil, err
	}
	cv := viewOf(v)
	return textResult(fmt.Sprintf("Created computer %s (%s).\n%s", v.ID, v.Status, jsonText(cv)), cv), nil
}

func (s *Server) listComputers(ctx context.Context, p governance.Principal, args json.RawMessage) (*sdk.CallToolResult, error) {
	var a struct {
		All *bool `json:"all"`
	}
	if msg := tools.DecodeArgs(args, &a); msg != "" {
		return failedResult(msg), nil
	}
	list, err := s.comp.List(ctx, p, deref(a.All), "")
	if err != nil {
		return nil, err
	}
	views := make([]computerView, len(list))
	for i, v := range list {
		views[i] = viewOf(v)
	}
	return textResult(counted(len(views), "computer")+"\n"+jsonText(views), map[string]any{"computers": views}), nil
}

// counted is "<n> <noun>s." ("1 <noun>.").
func counted(n int, noun string) string {
	if n == 1 {
		return "1 " + noun + "."
	}
	return fmt.Sprintf("%d %ss.", n, noun)
}

func (s *Server) deleteComputer(ctx context.Context, p governance.Principal, args json.RawMessage) (*sdk.CallToolResult, error) {
	var a struct {
		ComputerID *string `json:"computer_id"`
	}
	if msg := tools.DecodeArgs(args, &a, "computer_id"); msg != "" {
		return failedResult(msg), nil
	}
	if err := s.comp.Delete(ctx, p, *a.ComputerID); err != nil {
		return nil, err
	}
	return textResult("Deleted computer "+*a.ComputerID+".", nil), nil
}

func (s *Server) listFiles(ctx context.Context, p governance.Principal, args json.RawMessage) (*sdk.CallToolResult, error) {
	var a struct {
		ComputerID *string `json:"computer_id"`
		Path       *string `json:"path"`
	}
	if msg := tools.DecodeArgs(args, &a, "computer_id"); msg != "" {
		return failedResult(msg), nil
	}
	list, err := s.comp.ListFiles(ctx, p, *a.ComputerID, deref(a.Path))
	if err != nil {
		return nil, err
	}
	entries := make([]fileEntry, len(list.Entries))
	var b strings.Builder
	for i, fi := range list.Entries {
		entries[i] = entryOf(fi)
		fmt.Fprintf(&b, "%s\t%d\t%s\n", fi.Type, fi.Size, fi.Path)
	}
	if len(entries) == 0 {
		b.WriteString("(empty directory)\n")
	}
	if list.Truncated {
		b.WriteString("[truncated: the directory has more entries]\n")
	}
	return textResult(b.String(), map[string]any{"entries": entries, "truncated": list.Truncated}), nil
}

// computerView is a computer as the MCP tools show it (the transport's own
// shape, as REST has its own in internal/httpapi).
type computerView struct {
	ID        string            `json:"id"`
	Status    string            `json:"status"`
	Template  string            `json:"template"`
	CreatedAt string            `json:"created_at"`
	ExpiresAt string            `json:"expires_at"`
	Limits    limitsView        `json:"limits"`
	Metadata  map[string]string `json:"metadata,omitempty"`
	Failure   string            `json:"failure,omitempty"`
}

type limitsView struct {
	MemoryMB           int64   `json:"memory_mb"`
	CPUs               float64 `json:"cpus"`
	Pids               int64   `json:"pids"`
	DiskMB             int64   `json:"disk_mb"`
	LifetimeSeconds    int64   `json:"lifetime_seconds"`
	ExecTimeoutSeconds int64   `json:"exec_timeout_seconds"`
	IdleTimeoutSeconds int64   `json:"idle_timeout_seconds,omitempty"`
	// NetworkPolicy is an internet computer's (absent: loopback only).
	NetworkPolicy *networkPolicy `json:"network_policy,omitempty"`
}

// networkPolicyOf is a computer's policy as the tools show it (its
// domain secrets' names are not shown).
func networkPolicyOf(p *computer.NetworkPolicy) *networkPolicy {
	if p == nil {
		return nil
	}
	return &networkPolicy{Type: p.Type, AllowedDomains: p.AllowedDomains, AllowedCIDRs: p.AllowedCIDRs}
}

func viewOf(v computer.View) computerView {
	l := v.Limits
	return computerView{ID: v.ID, Status: v.Status, Template: v.Template,
		CreatedAt: v.CreatedAt.UTC().Format(time.RFC3339), ExpiresAt: v.ExpiresAt.UTC().Format(time.RFC3339),
		Limits: limitsView{MemoryMB: l.MemoryMB, CPUs: l.CPUs, Pids: l.Pids, DiskMB: l.DiskMB,
			LifetimeSeconds: int64(l.Lifetime / time.Second), ExecTimeoutSeconds: int64(l.ExecTimeout / time.Second),
			IdleTimeoutSeconds: int64(l.IdleTimeout / time.Second), NetworkPolicy: networkPolicyOf(l.NetworkPolicy)},
		Metadata: v.Metadata, Failure: v.Failure}
}

// fileEntry is a directory entry as list_files shows it.
type fileEntry struct {
	Name string `json:"name"`
	Path string `json:"path"`
	Type string `json:"type"`
	Size int64  `json:"size"`
}

func entryOf(fi sandbox.FileInfo) fileEntry {
	return fileEntry{Name: fi.Name, Path: fi.Path, Type: fi.Type, Size: fi.Size}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
