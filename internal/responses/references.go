package responses

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/store"
)

// maxReferences bounds the item_reference items of one input.
const maxReferences = 1024

// resolveReferences replaces each item_reference input item
// ({"type":"item_reference","id":…}) by the output item of a stored
// response of p's organisation that it names, as the client received it
// (then parsed like any item sent back). An unknown id is a 400 naming
// the item. The AI SDK sends earlier assistant turns this way when its
// responses are stored.
func (g *Gateway) resolveReferences(ctx context.Context, p governance.Principal, req *Request) error {
	var items []json.RawMessage
	if json.Unmarshal(req.Input, &items) != nil {
		return nil // a string, or malformed: parseInput says so
	}
	changed, n := false, 0
	for i, it := range items {
		var ref struct {
			Type string `json:"type"`
			ID   string `json:"id"`
		}
		if json.Unmarshal(it, &ref) != nil || ref.Type != "item_reference" {
			continue
		}
		param := fmt.Sprintf("input[%d]", i)
		if err := strict(it, &ref, param); err != nil {
			return err
		}
		if n++; n > maxReferences {
			return invalid(param, "an input holds at most %d item_reference items", maxReferences)
		}
		if ref.ID == "" {
			return invalid(param+".id", "an item_reference item needs the id of an output item")
		}
		if g.responses == nil {
			return invalid(param, "item_reference needs stored responses, and this deployment stores none: send the item itself")
		}
		item, err := g.responses.Item(ctx, p.Org.ID, ref.ID)
		if errors.Is(err, store.ErrNotFound) {
			return invalid(param+".id", "no stored response has an output item %q (items of responses stored with store: false, deleted ones or another organisation's cannot be referenced)", ref.ID)
		}
		if err != nil {
			return fmt.Errorf("gateway: resolve item_reference %s: %w", ref.ID, err)
		}
		items[i], changed = item, true
	}
	if changed {
		raw, err := json.Marshal(items)
		if err != nil {
			return err
		}
		req.Input = raw
	}
	return nil
}

// outputItems are the response's output items by id, as stored for
// item_reference.
func outputItems(output []any) map[string]json.RawMessage {
	items := make(map[string]json.RawMessage, len(output))
	for _, it := range output {
		raw, err := json.Marshal(it)
		if err != nil {
			continue
		}
		var head struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(raw, &head) == nil && head.ID != "" {
			items[head.ID] = raw
		}
	}
	return items
}
