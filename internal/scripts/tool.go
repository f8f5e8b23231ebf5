package scripts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/store"
	"github.com/cubicle-sandbox/cubicle/internal/tools"
)

// Where a call puts the program, and what it tells it.
const (
	// Dir holds the programs in the computer: a hidden directory of the
	// workspace (never cited as a file the code wrote).
	Dir = tools.Workspace + "/.scripts"
	// EnvName is the variable that holds the script's name.
	EnvName = "CUBICLE_SCRIPT"
	// AuditKind is the kind of a script call's computer.executed event.
	AuditKind = "script"
	// maxSchemaError bounds the schema's complaint the model reads.
	maxSchemaError = 1024
	// MaxArgsBytes bounds a call's arguments (they are checked against
	// the schema in the server, then given on stdin).
	MaxArgsBytes = 64 << 10
)

// ToolName is the tool of the script name.
func ToolName(name string) string { return ToolPrefix + name }

// Tools returns p's organisation's scripts as tools, by name. A tool
// reads its script again when it runs, so a call runs the version
// registered at that moment (and a deleted script is an unknown tool).
func (s *Service) Tools(ctx context.Context, p governance.Principal) ([]tools.Tool, error) {
	list, err := s.List(ctx, p)
	if err != nil {
		return nil, err
	}
	out := make([]tools.Tool, 0, len(list))
	for _, sc := range list {
		out = append(out, s.tool(p.Org.ID, sc))
	}
	return out, nil
}

// Lookup returns the tool named name of p's organisation's scripts
// (false: name is no script tool, or the organisation has no such
// script).
func (s *Service) Lookup(ctx context.Context, p governance.Principal, name string) (tools.Tool, bool, error) {
	short, ok := strings.CutPrefix(name, ToolPrefix)
	if !ok || CheckName(short) != "" {
		return tools.Tool{}, false, nil
	}
	sc, err := s.st.Scripts().Get(ctx, p.Org.ID, short)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return tools.Tool{}, false, nil
	case err != nil:
		return tools.Tool{}, false, fmt.Errorf("scripts: look up %s: %w", short, err)
	}
	return s.tool(p.Org.ID, sc), true, nil
}

// tool is sc as a tool of the organisation org.
func (s *Service) tool(org string, sc store.Script) tools.Tool {
	name := sc.Name
	return tools.Tool{Name: ToolName(name), Description: sc.Description, Schema: sc.InputSchema, Loose: true,
		Kind: AuditKind,
		Run: func(ctx context.Context, env tools.Env, args json.RawMessage) (tools.Result, error) {
			return s.run(ctx, env, org, name, args)
		}}
}

// failed is a tool error the model reads.
func failed(format string, args ...any) tools.Result {
	return tools.Result{Output: fmt.Sprintf(format, args...), Failed: true}
}

// run is one call: the script as registered now, the arguments checked
// against its schema, its program written into the computer and run
// there with the arguments on its standard input.
func (s *Service) run(ctx context.Context, env tools.Env, org, name string, args json.RawMessage) (tools.Result, error) {
	sc, err := s.st.Scripts().Get(ctx, org, name)
	if errors.Is(err, store.ErrNotFound) {
		return failed("%s", tools.UnknownTool(ToolName(name))), nil
	}
	if err != nil {
		return tools.Result{}, fmt.Errorf("scripts: read %s: %w", name, err)
	}
	audit := map[string]any{"script": name, "version": sc.Version}
	input, msg := tools.ArgsObject(args)
	if msg != "" {
		return withAudit(failed("%s", msg), audit), nil
	}
	if len(input) > MaxArgsBytes {
		return withAudit(failed("Invalid arguments: they are %d bytes; a script's arguments are at most %d.", len(input), MaxArgsBytes), audit), nil
	}
	if msg := checkArgs(sc.InputSchema, input); msg != "" {
		return withAudit(failed("%s", msg), audit), nil
	}
	var stdin bytes.Buffer
	json.Compact(&stdin, input) // valid: ArgsObject checked it
	stdin.WriteByte('\n')
	prog := Dir + "/" + name
	if _, err := env.Sandbox.WriteFile(ctx, sandbox.FileWrite{Path: prog, Parents: true}, strings.NewReader(sc.Source)); err != nil {
		res, err := tools.FileError(err, prog)
		return withAudit(res, audit), err
	}
	argv := append(append([]string{}, sc.Interpreter...), prog)
	req := sandbox.ExecRequest{Argv: argv, Cwd: tools.Workspace, Env: []string{EnvName + "=" + name},
		Timeout: tools.CapSeconds(env.Limits.Exec(), sc.TimeoutSeconds)}
	res, err := tools.RunProcess(ctx, env, req, &stdin)
	if err != nil {
		if msg := startError(err, argv[0]); msg != "" {
			return withAudit(failed("%s", msg), audit), nil
		}
		return tools.Result{}, err
	}
	return withAudit(res, audit), nil
}

// checkArgs checks the arguments object against the script's schema; it
// returns the sentence for the model, or "".
func checkArgs(schema, input json.RawMessage) string {
	cs, err := compileSchema(schema, false)
	if err != nil { // stored schemas were checked; a bound that changed since
		return "The script's input schema cannot be used: " + err.Error()
	}
	var inst any
	if err := json.Unmarshal(input, &inst); err != nil {
		return "Invalid arguments: expected a JSON object."
	}
	if n := values(inst); n*cs.expanded > MaxCheckWork {
		return fmt.Sprintf("Invalid arguments: they hold %d JSON values, too many to check against this script's input schema (at most %d here).",
			n, MaxCheckWork/cs.expanded)
	}
	if err := validate(cs.rs, inst); err != nil {
		return "Invalid arguments: they do not match the script's input schema: " + cutMessage(err.Error())
	}
	return ""
}

// startError is the sentence of an interpreter the computer cannot start
// ("": err is the computer's failure).
func startError(err error, interp string) string {
	switch {
	case errors.Is(err, sandbox.ErrNotFound), errors.Is(err, sandbox.ErrNotDir):
		return "The script's interpreter was not found in the computer: " + interp
	case errors.Is(err, sandbox.ErrPermission):
		return "The script's interpreter cannot be run in the computer (permission denied): " + interp
	}
	return ""
}

// withAudit adds the script's name and version to the call's audit event.
func withAudit(r tools.Result, audit map[string]any) tools.Result {
	r.Audit = audit
	return r
}
