package main

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// TestServeDeniedByPolicy: computers.region from the environment, an
// organisation's policy set with 'cubicle orgs set --policy' while the
// server runs: a regions_allow without the region refuses computers with
// 403 "Denied by policy." (audited, nothing created); the region
// exception builtin:computer allows them; a bad --policy names the field.
func TestServeDeniedByPolicy(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir, serveEnv("CUBICLE_ADMIN_KEY="+serveAdminKey, "CUBICLE_COMPUTERS_REGION=eu-west",
		"CUBICLE_COMPUTERS_POOL_SIZE=0"))
	org := s.firstOrg(t)
	if r := cli(t, "orgs", "set", "--data", dir, "--policy", `{"settings":{"regions_allow":["us-east"]}}`, org); r.code != 0 || !strings.Contains(r.stdout, `"regions_allow":["us-east"]`) {
		t.Fatalf("orgs set --policy: %+v", r)
	}
	if r := cli(t, "orgs", "set", "--data", dir, "--policy", `{"settings":{"regions":["us-east"]}}`, org); r.code != 2 || !strings.Contains(r.stderr, "policy.settings.regions") {
		t.Fatalf("a bad --policy: %+v", r)
	}
	var r httpResult
	for range 50 { // the server caches a key's principal for up to 2 s
		if r = s.do("POST", "/v1/computers", `{}`); r.code == 403 {
			break
		}
		if r.code == 201 {
			var v struct{ ID string }
			json.Unmarshal(r.body, &v)
			s.do("DELETE", "/v1/computers/"+v.ID, "")
		}
		exec.Command("sleep", "0.1").Run()
	}
	var e struct {
		Error struct{ Code, Message string }
	}
	json.Unmarshal(r.body, &e)
	if r.code != 403 || e.Error.Code != "denied_by_policy" || e.Error.Message != "Denied by policy." {
		t.Fatalf("create under regions_allow [us-east] in eu-west: %d %s", r.code, r.body)
	}
	var audit struct {
		Data []struct {
			Type string          `json:"type"`
			Data json.RawMessage `json:"data"`
		} `json:"data"`
	}
	s.decode("GET", "/v1/audit?type=computer.denied_by_policy", "", 200, &audit)
	if len(audit.Data) == 0 || !strings.Contains(string(audit.Data[0].Data), "regions_allow") {
		t.Fatalf("audit: %+v", audit.Data)
	}
	if r := cli(t, "orgs", "set", "--data", dir, "--policy", `{"settings":{"regions_allow":["us-east"],"region_exceptions":["builtin:computer"]}}`, org); r.code != 0 {
		t.Fatalf("orgs set: %+v", r)
	}
	for range 50 {
		if r = s.do("POST", "/v1/computers", `{}`); r.code == 201 {
			break
		}
		exec.Command("sleep", "0.1").Run()
	}
	if r.code != 201 {
		t.Fatalf("create with the region exception: %d %s", r.code, r.body)
	}
}

// TestServeOnlyInternetNeedsInternet: network.only_internet without
// network.internet stops the server with a message naming the key.
func TestServeOnlyInternetNeedsInternet(t *testing.T) {
	cmd := exec.Command(cubicleBin, "serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0")
	cmd.Env = serveEnv("CUBICLE_ADMIN_KEY="+serveAdminKey, "CUBICLE_NETWORK_ONLY_INTERNET=true")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "network.only_internet") {
		t.Fatalf("serve: %v\n%s", err, out)
	}
}
