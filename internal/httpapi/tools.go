package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/responses"
	"github.com/cubicle-sandbox/cubicle/internal/tools"
)

// Errors of POST /v1/tools/{name}/call for a computer tool (422).
var (
	errOutsideTurn = withParam("name", errdefs.New(errdefs.FailedPrecondition, "computer_tool_outside_turn",
		"A computer tool runs only in a turn of its own."))
	errToolNotConfigured = withParam("name", errdefs.New(errdefs.FailedPrecondition, "computer_not_configured",
		responses.NotConfiguredSentence))
)

// listTools answers the definitions the key may use, in OpenAI function
// format: the built-in tools, then its organisation's scripts when the
// key has the computer capability (the computer system tool not needed).
func (a *API) listTools(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	computers := a.comp.ToolsEnabled(p)
	defs := a.tools.Definitions(func(t *tools.Tool) bool { return !t.Computer || computers })
	if a.comp.ScriptsEnabled(p) {
		ts, err := a.scripts.Tools(r.Context(), p)
		if err != nil {
			return err
		}
		for _, t := range ts {
			defs = append(defs, t.Definition())
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": defs})
	return nil
}

// lookupTool finds a built-in tool, or a script of p's organisation, with
// the registry it runs from; an unknown name is the 404 (param name).
func (a *API) lookupTool(r *http.Request, p governance.Principal, name string) (*tools.Tool, *tools.Registry, error) {
	if t, ok := a.tools.Lookup(name); ok {
		return t, a.tools, nil
	}
	t, ok, err := a.scripts.Lookup(r.Context(), p, name)
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		return nil, nil, unknownTool(name)
	}
	return &t, tools.NewRegistry(t), nil
}

// toolCall is the body of a tool call: arguments are a JSON object, or a
// JSON string holding one (as OpenAI sends them).
type toolCall struct {
	Arguments json.RawMessage `json:"arguments"`
}

func (c *toolCall) check() error {
	a := bytes.TrimSpace(c.Arguments)
	if len(a) == 0 || string(a) == "null" {
		c.Arguments = json.RawMessage("{}")
		return nil
	}
	if a[0] != '{' && a[0] != '"' {
		return withParam("arguments", fmt.Errorf("%w: arguments must be a JSON object or a JSON string holding one", errBadRequest))
	}
	return nil
}

// checkNames refuses, in the arguments of tool t (also when they come as a
// JSON string), a key given twice or a property name of t's schema in
// another case, as every other body; the tool itself reports the rest.
func (c *toolCall) checkNames(t tools.Tool) error {
	inner := bytes.TrimSpace(c.Arguments)
	var s string
	if len(inner) > 0 && inner[0] == '"' && json.Unmarshal(inner, &s) == nil {
		inner = []byte(s)
	}
	if err := checkJSONAt(inner, nil, "arguments"); err != nil {
		return err
	}
	var args map[string]json.RawMessage
	var schema struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(inner, &args) != nil || json.Unmarshal(t.Schema, &schema) != nil {
		return nil
	}
	for k := range args {
		if _, ok := schema.Properties[k]; ok {
			continue
		}
		for p := range schema.Properties {
			if strings.EqualFold(p, k) {
				return withParam("arguments."+k, fmt.Errorf("%w: unknown field %q (field names are case-sensitive: %q)", errBadRequest, "arguments."+k, "arguments."+p))
			}
		}
	}
	return nil
}

// unknownTool is the 404 of a tool name that does not exist.
func unknownTool(name string) error {
	return withParam("name", errdefs.New(errdefs.NotFound, "", tools.UnknownTool(name)))
}

// computerTool runs a tool on a computer the caller holds.
func (a *API) computerTool(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	var body toolCall
	if err := decode(r, &body); err != nil {
		return err
	}
	if err := body.check(); err != nil {
		return err
	}
	name := r.PathValue("name")
	t, reg, err := a.lookupTool(r, p, name)
	if err != nil {
		return err
	}
	if err := body.checkNames(*t); err != nil {
		return err
	}
	res, err := a.comp.RunTool(r.Context(), p, r.PathValue("id"), reg, name, body.Arguments)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, answer(res))
	return nil
}

// callTool runs a tool outside a computer. Computer tools and scripts
// are refused with 422: they run only in a turn of their own (or on a
// held computer).
func (a *API) callTool(w http.ResponseWriter, r *http.Request, p governance.Principal) error {
	name := r.PathValue("name")
	t, reg, err := a.lookupTool(r, p, name)
	if err != nil {
		return err
	}
	if script := reg != a.tools; t.Computer || script {
		err := errOutsideTurn
		if (script && !a.comp.ScriptsEnabled(p)) || (!script && !a.comp.ToolsEnabled(p)) {
			err = errToolNotConfigured
		}
		code, body := errorBody(r, err)
		writeJSON(w, code, map[string]any{"error": body, "reason_code": body.Code})
		return nil
	}
	var body toolCall
	if err := decode(r, &body); err != nil {
		return err
	}
	if err := body.check(); err != nil {
		return err
	}
	if err := body.checkNames(*t); err != nil {
		return err
	}
	res, err := t.Run(r.Context(), tools.Env{}, body.Arguments)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, answer(res))
	return nil
}
