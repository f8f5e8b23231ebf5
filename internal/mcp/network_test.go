package mcp_test

import (
	"strings"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/mcp"
)

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
