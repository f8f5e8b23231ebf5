package responses

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cubicle-sandbox/cubicle/internal/datastore"
	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/tools"
)

// Datastores are the operator's datastore tools (*datastore.Service):
// <name>__query and sql__<name>, offered by {"type":"tool","name":…},
// answering the model with rows, or with "deliver": "computer" writing
// them into the response's computer (docs/tools.md, "Rows delivered to
// the computer").
type Datastores interface {
	Lookup(p governance.Principal, name string) (tools.Tool, bool)
	Deliverable(p governance.Principal, name string) bool
	Answer(ctx context.Context, p governance.Principal, name string, args json.RawMessage) tools.Result
	Deliver(ctx context.Context, p governance.Principal, c datastore.Call) (tools.Result, error)
}

var _ Datastores = (*datastore.Service)(nil)

// DeliverComputer is the one value of a tool's deliver.
const DeliverComputer = "computer"

// dataLookup is what a request may name of the datastores for p (nil:
// none are configured).
func (g *Gateway) dataLookup(p governance.Principal) *dataTools {
	if g.data == nil {
		return nil
	}
	return &dataTools{p: p, svc: g.data}
}

// dataTools are the datastore tools of one caller, for validation.
type dataTools struct {
	p   governance.Principal
	svc Datastores
}

// deliverError is the 422 of a deliver the request may not ask for.
func deliverError(param, format string, args ...any) error {
	return &Error{Kind: errdefs.FailedPrecondition, Code: "deliver_not_allowed", Message: fmt.Sprintf(format, args...), Param: param}
}

// dataTool adds the datastore tool {"type":"tool","name":…,"deliver":…}
// names; false: name is no datastore tool of the caller.
func (p *plan) dataTool(name string, deliver *string, param string) (bool, error) {
	if p.data == nil {
		return false, nil
	}
	tl, ok := p.data.svc.Lookup(p.data.p, name)
	if !ok {
		return false, nil
	}
	if deliver != nil {
		if err := p.checkDeliver(name, *deliver, param); err != nil {
			return true, err
		}
	}
	if _, named := p.dataTools[name]; named {
		return true, invalid(param+".name", "the tool %q is declared twice", name)
	}
	p.dataTools[name] = deliver != nil
	p.tools = append(p.tools, offered(tl))
	return true, nil
}

// checkDeliver: deliver is "computer", on a tool that may deliver, in a
// turn whose key would be offered builtin__computer_exec.
func (p *plan) checkDeliver(name, deliver, param string) error {
	param += ".deliver"
	switch {
	case deliver != DeliverComputer:
		return invalid(param, "deliver must be %q, got %q", DeliverComputer, deliver)
	case p.data == nil || !p.data.svc.Deliverable(p.data.p, name):
		return deliverError(param, "deliver is accepted only on an sql__ tool whose query reads and on a datastore's __query tool, not on %q", name)
	case !p.computers:
		return deliverError(param, "deliver needs a turn in which the key would be offered %s (the computer capability, the computer system tool and an organisation that allows computers)", tools.ExecName)
	}
	return nil
}

// refuseDeliver is the 422 of deliver on a tool that is no datastore's
// (code_interpreter, a computer tool, a client function).
func refuseDeliver(t json.RawMessage, param string) error {
	var d struct {
		Deliver json.RawMessage `json:"deliver"`
		Name    string          `json:"name"`
		Type    string          `json:"type"`
	}
	if json.Unmarshal(t, &d) != nil || d.Deliver == nil {
		return nil
	}
	what := d.Name
	if what == "" {
		what = d.Type
	}
	return deliverError(param+".deliver", "deliver is accepted only on an sql__ tool whose query reads and on a datastore's __query tool, not on %q", what)
}

// dataResult runs a call of a datastore tool: rows for the model, or,
// delivered, written into the response's computer (made at its first
// call; Deliver audits a refused delivery).
func (r *Run) dataResult(ctx context.Context, tc chatToolCall, itemID string, deliver bool) (tools.Result, error) {
	args := json.RawMessage(tc.Function.Arguments)
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	defer timed(&r.timing.Tools)()
	if !deliver {
		return r.g.data.Answer(ctx, r.p, tc.Function.Name, args), nil
	}
	return r.g.data.Deliver(ctx, r.p, datastore.Call{Tool: tc.Function.Name, ComputerID: r.computerID,
		CallID: tc.ID, ItemID: itemID, Args: args})
}

// dataNames are the datastore tools of the request, for choiceName.
func (p *plan) isDataTool(name string) bool {
	_, ok := p.dataTools[name]
	return ok
}
