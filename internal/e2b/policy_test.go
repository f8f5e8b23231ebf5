package e2b_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/e2b"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/httpapi"
	"github.com/cubicle-sandbox/cubicle/internal/httpapi/httpapitest"
)

// TestE2BDeniedByPolicy: creating a sandbox is a computer call. In a
// deployment whose computers run in eu-west, a key whose regions_allow
// leaves it out gets 403 with exactly "Denied by policy.", nothing is
// created and the refusal is audited; with the region exception
// builtin:computer the same key gets its sandbox.
func TestE2BDeniedByPolicy(t *testing.T) {
	t.Parallel()
	cfg := httpapitest.Config()
	cfg.Region = "eu-west"
	srv := httpapitest.StartMounted(t, agentBin, adminSecret, cfg, func(m *computer.Manager, g *governance.Service) httpapi.Mount {
		return e2b.New(m, g)
	})
	caps, _ := governance.ParseCapabilities([]byte(computerCaps))
	k, secret, err := srv.Gov.CreateKeyWithPolicy(context.Background(), srv.Admin.Org.ID, "e2b-policy", caps,
		governance.Policy{Settings: governance.PolicySettings{RegionsAllow: []string{"us-east"}}})
	if err != nil {
		t.Fatal(err)
	}
	hdr := map[string]string{"X-API-Key": secret, "Content-Type": "application/json"}
	url := srv.URL + e2b.Prefix + "/v2/sandboxes"
	status, body := call(t, "POST", url, hdr, []byte(`{"templateID":"base","timeout":60}`))
	var e struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if json.Unmarshal([]byte(body), &e); status != 403 || e.Message != "Denied by policy." {
		t.Fatalf("create under a regions_allow without eu-west: %d %s", status, body)
	}
	admin := map[string]string{"Authorization": "Bearer " + adminSecret}
	var list, audit struct {
		Data []json.RawMessage `json:"data"`
	}
	_, body = call(t, "GET", srv.URL+"/v1/computers", admin, nil)
	json.Unmarshal([]byte(body), &list)
	_, body = call(t, "GET", srv.URL+"/v1/audit?type=computer.denied_by_policy", admin, nil)
	json.Unmarshal([]byte(body), &audit)
	if len(list.Data) != 0 || len(audit.Data) != 1 {
		t.Fatalf("%d computers, audit %s", len(list.Data), body)
	}
	if _, err := srv.Gov.SetKeyPolicy(context.Background(), k.ID, governance.Policy{Settings: governance.PolicySettings{
		RegionsAllow: []string{"us-east"}, RegionExceptions: []string{governance.ComputerRegionException}}}); err != nil {
		t.Fatal(err)
	}
	if status, body := call(t, "POST", url, hdr, []byte(`{"templateID":"base","timeout":60}`)); status != 201 {
		t.Fatalf("create with the region exception: %d %s", status, body)
	}
}
