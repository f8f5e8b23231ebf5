package mcp

import (
	"context"
	"encoding/json"
	"net/http"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/log"
	"github.com/cubicle-sandbox/cubicle/internal/tools"
)

// Scripts are the organisations' own programs (*scripts.Service): each
// the MCP tool script__<name>, its schema's arguments plus computer_id,
// run on that computer as the REST tool endpoint runs it.
type Scripts interface {
	Tools(ctx context.Context, p governance.Principal) ([]tools.Tool, error)
}

// server is the MCP server of one request: the built-in tools, and the
// scripts of the principal's organisation when it has some and may use
// them. The tools are read for every request (the transport is stateless),
// so tools/list always shows the scripts registered at that moment.
func (s *Server) server(r *http.Request) *sdk.Server {
	rq, ok := r.Context().Value(requestKey{}).(*request)
	if !ok {
		return s.base
	}
	if rq.srv == nil {
		rq.srv = s.serverFor(r.Context(), rq.p)
	}
	return rq.srv
}

// serverFor builds the server of principal p (server).
func (s *Server) serverFor(ctx context.Context, p governance.Principal) *sdk.Server {
	if s.scripts == nil || !s.comp.ScriptsEnabled(p) {
		return s.base
	}
	ts, err := s.scripts.Tools(ctx, p)
	if err != nil {
		// The built-in tools still serve; a script call then says it is
		// unknown.
		log.From(ctx).ErrorContext(ctx, "mcp: reading the organisation's scripts", "org", p.Org.ID, "err", err)
		return s.base
	}
	if len(ts) == 0 {
		return s.base
	}
	srv := s.newServer()
	for _, t := range ts {
		schema, ok := scriptSchema(t.Schema)
		if !ok {
			log.From(ctx).WarnContext(ctx, "mcp: a script's schema cannot take computer_id; not offered over MCP", "org", p.Org.ID, "tool", t.Name)
			continue
		}
		srv.AddTool(&sdk.Tool{Name: t.Name, Title: t.Name, Description: t.Description, InputSchema: schema,
			Annotations: &sdk.ToolAnnotations{Title: t.Name, DestructiveHint: ptr(true), OpenWorldHint: ptr(false)}},
			s.handler(s.onComputer(t.Name, tools.NewRegistry(t))))
	}
	return srv
}

// scriptSchema is a script's input schema with computer_id added as a
// required property (false: the schema declares computer_id itself, as
// one registered before the name was reserved (scripts.ReservedProperty)
// may).
func scriptSchema(raw json.RawMessage) (json.RawMessage, bool) {
	var s map[string]any
	if json.Unmarshal(raw, &s) != nil || s["type"] != "object" {
		return nil, false // never stored so (scripts checks at registration)
	}
	props, _ := s["properties"].(map[string]any)
	if _, taken := props["computer_id"]; taken {
		return nil, false
	}
	b, err := json.Marshal(withComputerID(s))
	return b, err == nil
}
