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

// TestMCPNetworkPolicy: create_computer takes the REST API's
// network_policy without domain secrets, checked by the computers
// service: an allowlist on a deployment without internet is the REST
// API's refusal, a bad type is said, domain_secrets is an unknown field,
// and "disabled" makes a loopback-only computer.
func TestMCPNetworkPolicy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.connect(e.newKey(computerCaps))
	for _, c := range []struct {
		policy map[string]any
		want   string
	}{
		{map[string]any{"type": "allowlist", "allowed_domains": []string{"example.com"}}, "this deployment gives computers no internet"},
		{map[string]any{"type": "open"}, `network_policy.type must be "disabled" or "allowlist", got "open"`},
		{map[string]any{"type": "allowlist", "domain_secrets": []any{}}, `unknown field "domain_secrets"`},
		{map[string]any{"type": "disabled", "allowed_domains": []string{"example.com"}}, "a disabled policy allows nothing"},
	} {
		r := call(t, s, mcp.CreateComputer, map[string]any{"network_policy": c.policy})
		if !r.IsError || !strings.Contains(text(r), c.want) {
			t.Errorf("%v: error %v %q, want %q", c.policy, r.IsError, text(r), c.want)
		}
	}
	r := call(t, s, mcp.CreateComputer, map[string]any{"network_policy": map[string]any{"type": "disabled"}})
	var v struct {
		ID     string
		Limits map[string]any
	}
	structured(t, r, &v)
	if r.IsError || !strings.HasPrefix(v.ID, "cmp_") || v.Limits["network_policy"] != nil {
		t.Fatalf("a disabled policy: %q", text(r))
	}
	call(t, s, mcp.DeleteComputer, map[string]any{"computer_id": v.ID})
}
