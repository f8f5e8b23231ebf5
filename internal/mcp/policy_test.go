package mcp_test

import (
	"context"
	"strings"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/config"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/httpapi/httpapitest"
	"github.com/cubicle-sandbox/cubicle/internal/mcp"
)

// policyKey makes a computer key of the admin's organisation with policy
// pol and returns its secret.
func (e *env) policyKey(pol governance.PolicySettings) string {
	e.t.Helper()
	c, err := governance.ParseCapabilities([]byte(computerCaps))
	if err != nil {
		e.t.Fatal(err)
	}
	_, secret, err := e.gov.CreateKeyWithPolicy(context.Background(), e.admin.Org.ID, "mcp-policy", c, governance.Policy{Settings: pol})
	if err != nil {
		e.t.Fatal(err)
	}
	return secret
}

// TestMCPPolicy: the MCP tools are computer calls like the REST API's. In
// a deployment whose computers run in eu-west, a key whose regions_allow
// leaves it out is told exactly "Denied by policy." by every tool (as a
// tool error; on a computer, as the tool's answer), nothing is created
// and each refusal is audited; the region exception builtin:computer
// allows computers, and a key that redacts personal data reads every tool
// result redacted.
func TestMCPPolicy(t *testing.T) {
	t.Parallel()
	cfg := httpapitest.Config()
	cfg.Prelude, cfg.Region = config.DefaultPrelude, "eu-west"
	srv := httpapitest.Start(t, agentBin, adminSecret, cfg)
	e := &env{t: t, url: srv.URL, gov: srv.Gov, admin: srv.Admin}
	denied := e.connect(e.policyKey(governance.PolicySettings{RegionsAllow: []string{"us-east"}}))
	for _, name := range []string{mcp.CreateComputer, mcp.ListComputers} {
		if res := call(t, denied, name, map[string]any{}); !res.IsError || text(res) != "Denied by policy." {
			t.Fatalf("%s under a regions_allow without eu-west: %+v %q", name, res.IsError, text(res))
		}
	}
	var list struct {
		Data []struct{ ID string } `json:"data"`
	}
	if e.rest(adminSecret, "GET", "/v1/computers", &list); len(list.Data) != 0 {
		t.Fatalf("a refused create made computers: %+v", list.Data)
	}

	masked := e.connect(e.policyKey(governance.PolicySettings{RegionsAllow: []string{"us-east"},
		RegionExceptions: []string{governance.ComputerRegionException}, RedactPII: true}))
	var made struct {
		ID string `json:"id"`
	}
	structured(t, call(t, masked, mcp.CreateComputer, map[string]any{}), &made)
	content := "jan@example.nl +31 6 12345678\n"
	if res := call(t, masked, mcp.WriteFile, map[string]any{"computer_id": made.ID, "path": "p.txt", "content": content}); res.IsError {
		t.Fatalf("write_file: %q", text(res))
	}
	for name, args := range map[string]map[string]any{
		mcp.Exec:     {"computer_id": made.ID, "command": "cat p.txt"},
		mcp.ReadFile: {"computer_id": made.ID, "path": "p.txt"},
		mcp.Python:   {"computer_id": made.ID, "cells": []any{map[string]any{"code": "print(open('p.txt').read())"}}},
	} {
		if got := text(call(t, masked, name, args)); !strings.Contains(got, "[redacted email] [redacted phone]") || strings.Contains(got, "example.nl") {
			t.Errorf("%s by a key that redacts personal data: %q", name, got)
		}
	}
	// The refused key's call on that computer is the tool's answer.
	if res := call(t, denied, mcp.Exec, map[string]any{"computer_id": made.ID, "command": "true"}); !res.IsError || text(res) != "Denied by policy." {
		t.Fatalf("exec on a computer under a refusing policy: %q", text(res))
	}
	var audit struct {
		Data []struct {
			Type string `json:"type"`
		} `json:"data"`
	}
	e.rest(adminSecret, "GET", "/v1/audit?type=computer.denied_by_policy", &audit)
	if len(audit.Data) != 3 {
		t.Fatalf("%d refusals audited, want 3: %+v", len(audit.Data), audit.Data)
	}
}
