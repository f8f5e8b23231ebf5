package responses

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/scripts"
	"github.com/cubicle-sandbox/cubicle/internal/tools"
)

// Scripts are the organisations' own programs (*scripts.Service), each
// the tool script__<name>, named by {"type":"tool","name":…} (or the
// toolset script__*) and run in the response's computer like a computer
// tool. A key needs the computer capability for them, not the computer
// system tool (Computers.ScriptsEnabled).
type Scripts interface {
	Tools(ctx context.Context, p governance.Principal) ([]tools.Tool, error)
}

var _ Scripts = (*scripts.Service)(nil)

// scriptTools are the script tools a request may name (nil: it names
// none, so none were read).
type scriptTools struct {
	// enabled: the key may use scripts here; reg holds the organisation's.
	enabled bool
	reg     *tools.Registry
}

// loadScripts reads p's organisation's scripts when the request names a
// script tool (no read otherwise).
func (g *Gateway) loadScripts(ctx context.Context, p governance.Principal, list []json.RawMessage) (*scriptTools, error) {
	if !namesScripts(list) {
		return nil, nil
	}
	if g.scripts == nil || !g.comp.ScriptsEnabled(p) {
		return &scriptTools{}, nil
	}
	ts, err := g.scripts.Tools(ctx, p)
	if err != nil {
		return nil, err
	}
	return &scriptTools{enabled: true, reg: tools.NewRegistry(ts...)}, nil
}

// namesScripts reports whether a request's tools name a script tool.
func namesScripts(list []json.RawMessage) bool {
	for _, raw := range list {
		var t struct {
			Type string `json:"type"`
			Name string `json:"name"`
		}
		if json.Unmarshal(raw, &t) == nil && t.Type == "tool" && strings.HasPrefix(t.Name, scripts.ToolPrefix) {
			return true
		}
	}
	return false
}

// scriptTool adds the script tools {"type":"tool","name":…} names: one
// script, or the toolset script__* (which may match none); false: name is
// no script tool's.
func (p *plan) scriptTool(name string, deliver *string, param string) (bool, error) {
	if !strings.HasPrefix(name, scripts.ToolPrefix) {
		return false, nil
	}
	if p.scripts == nil || !p.scripts.enabled {
		return true, &Error{Kind: errdefs.InvalidArgument, Code: "computer_not_configured", Message: NotConfiguredSentence, Param: "tools"}
	}
	matched := p.scripts.reg.Match(name)
	if len(matched) == 0 && !strings.HasSuffix(name, "*") {
		return true, invalid(param+".name", "unknown gateway tool %q: the organisation has no script %q (GET /v1/tools lists the key's tools)",
			name, strings.TrimPrefix(name, scripts.ToolPrefix))
	}
	if deliver != nil {
		return true, p.checkDeliver(name, *deliver, param)
	}
	for _, tl := range matched {
		if !p.scriptTools[tl.Name] {
			p.scriptTools[tl.Name] = true
			p.tools = append(p.tools, offered(*tl))
		}
	}
	return true, nil
}

// registry is the registry a gateway tool of the request runs from.
func (r *Run) registry(name string) *tools.Registry {
	if r.plan.scriptTools[name] {
		return r.plan.scripts.reg
	}
	return r.g.reg
}
