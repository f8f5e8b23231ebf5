package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/tools"
)

func (s *Server) extendComputer(ctx context.Context, p governance.Principal, args json.RawMessage) (*sdk.CallToolResult, error) {
	var a struct {
		ComputerID      *string `json:"computer_id"`
		LifetimeSeconds *int    `json:"lifetime_seconds"`
	}
	if msg := tools.DecodeArgs(args, &a, "computer_id", "lifetime_seconds"); msg != "" {
		return failedResult(msg), nil
	}
	if *a.LifetimeSeconds < 1 {
		return failedResult("Invalid arguments: lifetime_seconds must be at least 1."), nil
	}
	v, err := s.comp.Extend(ctx, p, *a.ComputerID, seconds(a.LifetimeSeconds))
	if err != nil {
		return nil, err
	}
	cv := viewOf(v)
	return textResult(fmt.Sprintf("Computer %s now ends at %s.\n%s", v.ID, cv.ExpiresAt, jsonText(cv)), cv), nil
}

// templateView is a template as list_templates shows it.
type templateView struct {
	Name string `json:"name"`
	// Python is whether its computers run Python cells (the python tool).
	Python   bool            `json:"python"`
	Default  bool            `json:"default,omitempty"`
	Created  string          `json:"created_at,omitempty"`
	Defaults json.RawMessage `json:"defaults,omitempty"`
}

func (s *Server) listTemplates(ctx context.Context, p governance.Principal, args json.RawMessage) (*sdk.CallToolResult, error) {
	if msg := tools.DecodeArgs(args, &struct{}{}); msg != "" {
		return failedResult(msg), nil
	}
	ts, err := s.comp.ListTemplates(ctx, p)
	if err != nil {
		return nil, err
	}
	views := make([]templateView, len(ts))
	for i, t := range ts {
		views[i] = templateView{Name: t.Name, Python: t.Python != "", Default: t.Default}
		if !t.Created.IsZero() {
			views[i].Created = t.Created.UTC().Format(time.RFC3339)
		}
		if d, err := json.Marshal(t.Defaults); err == nil && string(d) != "{}" {
			views[i].Defaults = d
		}
	}
	return textResult(counted(len(views), "template")+"\n"+jsonText(views), map[string]any{"templates": views}), nil
}
