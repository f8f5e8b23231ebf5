package computer

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/artifact"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/pii"
	"github.com/cubicle-sandbox/cubicle/internal/tools"
)

// ToolsEnabled reports whether p may use the computer tools here: the
// deployment runs computers (Config.Disabled is false), the organisation
// allows them, the key has the computer capability and the "computer"
// system tool.
func (m *Manager) ToolsEnabled(p governance.Principal) bool {
	return m.ScriptsEnabled(p) && p.Caps.HasSystemTool("computer")
}

// ScriptsEnabled reports whether p may use its organisation's scripts
// (internal/scripts): as ToolsEnabled without the "computer" system
// tool ("A script needs the computer capability, but not the three
// tools").
func (m *Manager) ScriptsEnabled(p governance.Principal) bool {
	return m != nil && !m.cfg.Disabled && allowed(p) == nil
}

// MaxFileBytes is the largest file a tool may write (computers.max_file_bytes),
// for a transport that bounds request bodies (internal/mcp).
func (m *Manager) MaxFileBytes() int64 {
	return cmp.Or(m.cfg.MaxFileBytes, tools.DefaultMaxFileBytes)
}

// RunTool runs one tool of reg on a live computer of p's organisation. A
// tool error is the Result's Output, and so is a call the policy refuses
// (ErrDeniedByPolicy: the Output is exactly "Denied by policy."); the
// error return is for an unknown tool (ErrNotFound), a refused principal,
// a computer that is gone or unreachable. For a principal that redacts
// personal data (governance.Principal.RedactsPII) every text of the
// answer is redacted (internal/pii). It records computer.executed with the tool's kind (exec,
// write_file, read_file, python), the
// duration and, for a command, the exit code: never arguments, output or
// paths.
func (m *Manager) RunTool(ctx context.Context, p governance.Principal, id string, reg *tools.Registry, name string, args json.RawMessage) (tools.Result, error) {
	t, ok := reg.Lookup(name)
	if !ok {
		return tools.Result{}, fmt.Errorf("%w: no tool %q", ErrNotFound, name)
	}
	if t.Computer && !p.Caps.HasSystemTool("computer") {
		return tools.Result{}, fmt.Errorf("%w: the key's tooling lacks the computer system tool", ErrForbidden)
	}
	// The metric's label: a tool's name, or its kind where the names are
	// an organisation's (scripts), so the labels stay few.
	label := cmp.Or(t.Kind, name)
	l, err := m.running(ctx, p, id)
	if errors.Is(err, ErrDeniedByPolicy) {
		// The model is told the fixed sentence and carries on (the
		// refusal is already in the audit trail).
		m.metrics.toolCall(label, OutcomeFailed, 0)
		return tools.Result{Output: governance.DeniedByPolicySentence, Failed: true}.Normalize(), nil
	}
	if err != nil {
		return tools.Result{}, err
	}
	defer m.busy(l)()
	env := tools.Env{Sandbox: l.sb, Artifacts: p.Caps.HasArtifacts(), Limits: tools.Limits{
		ExecTimeout: l.execLimit, MaxStreamBytes: m.cfg.MaxOutputBytes,
		MaxFileBytes: m.cfg.MaxFileBytes, Prelude: m.preludeFor(l.sb.Spec())}}
	if p.RedactsPII() {
		// The one place every tool result a model reads passes through
		// (the gateway, MCP, the tool endpoint; scripts too): redacted
		// where the computer's text enters it (tools.Env.Redact).
		env.Redact = pii.Redact
	}
	if a := m.cfg.Artifacts; a != nil && env.Artifacts {
		env.Export = func(ctx context.Context, path string) (artifact.Ref, error) {
			return a.Export(ctx, p, l.sb, id, path)
		}
	}
	start := time.Now()
	res, err := t.Run(ctx, env, args)
	elapsed := time.Since(start)
	outcome := OutcomeOK
	switch {
	case err != nil:
		outcome = OutcomeError
	case res.Failed:
		outcome = OutcomeFailed
	}
	m.metrics.toolCall(label, outcome, elapsed)
	data := map[string]any{"kind": cmp.Or(t.Kind, toolKind(name)), "duration_ms": elapsed.Milliseconds(), "status": outcome}
	if res.ExitCode != nil {
		data["exit_code"] = *res.ExitCode
	}
	for k, v := range res.Audit {
		data[k] = v
	}
	m.gov.Record(ctx, p, "computer.executed", id, data)
	if res.TaskID != "" { // a shell task: a background process, as StartProcess records it
		m.gov.Record(ctx, p, "computer.process_started", id, map[string]any{"process_id": res.TaskID})
	}
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return tools.Result{}, err
		}
		return tools.Result{}, m.callError(ctx, id, err)
	}
	return res.Normalize(), nil
}

// toolKind is the audit kind of a tool: its name without the builtin
// computer prefix (exec, write_file, read_file), or the name itself.
func toolKind(name string) string {
	return strings.TrimPrefix(name, "builtin__computer_")
}
