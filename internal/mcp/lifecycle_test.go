package mcp_test

import (
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/mcp"
)

// TestMCPLifecycle: list_templates shows the host's runtime as the
// default with Python; extend_computer moves a computer's end to
// lifetime_seconds from now and refuses a lifetime under 1 second and a
// computer that is not there.
func TestMCPLifecycle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.connect(e.newKey(computerCaps))

	var ts struct {
		Templates []struct {
			Name    string
			Python  bool
			Default bool
		}
	}
	r := call(t, s, mcp.ListTemplates, nil)
	structured(t, r, &ts)
	if r.IsError || !strings.HasPrefix(text(r), "1 template.\n") || len(ts.Templates) != 1 || ts.Templates[0].Name != "host" || !ts.Templates[0].Python || !ts.Templates[0].Default {
		t.Errorf("list_templates: %q", text(r))
	}

	var c struct {
		ID        string
		ExpiresAt string `json:"expires_at"`
	}
	structured(t, call(t, s, mcp.CreateComputer, map[string]any{"lifetime_seconds": 60}), &c)
	before, _ := time.Parse(time.RFC3339, c.ExpiresAt)
	r = call(t, s, mcp.ExtendComputer, map[string]any{"computer_id": c.ID, "lifetime_seconds": 600})
	var v struct {
		ExpiresAt string `json:"expires_at"`
	}
	structured(t, r, &v)
	after, _ := time.Parse(time.RFC3339, v.ExpiresAt)
	if r.IsError || !strings.HasPrefix(text(r), "Computer "+c.ID+" now ends at ") || after.Sub(before) < 500*time.Second {
		t.Errorf("extend_computer: %q (before %s)", text(r), c.ExpiresAt)
	}
	for _, bad := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"computer_id": c.ID, "lifetime_seconds": 0}, "lifetime_seconds must be at least 1"},
		{map[string]any{"computer_id": c.ID}, "lifetime_seconds is required"},
		{map[string]any{"computer_id": "cmp_nope", "lifetime_seconds": 60}, "cmp_nope"},
	} {
		if r := call(t, s, mcp.ExtendComputer, bad.args); !r.IsError || !strings.Contains(text(r), bad.want) {
			t.Errorf("%v: error %v %q, want %q", bad.args, r.IsError, text(r), bad.want)
		}
	}
	call(t, s, mcp.DeleteComputer, map[string]any{"computer_id": c.ID})
}
