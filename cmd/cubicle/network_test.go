package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/egress/egresstest"
)

// TestServeInternetComputers: [network] turns internet on for computers
// that ask with a network_policy within the deployment's allowlist; the
// upstream side dials into a test internet (dial_netns), so nothing leaves
// the machine.
func TestServeInternetComputers(t *testing.T) {
	in := egresstest.New(t)
	in.Check(t)
	s := startServer(t, t.TempDir(), serveEnv("CUBICLE_ADMIN_KEY="+serveAdminKey,
		"CUBICLE_NETWORK_INTERNET=true", "CUBICLE_NETWORK_ALLOWED_DOMAINS=*.test,example.org",
		"CUBICLE_NETWORK_ALLOWED_CIDRS=203.0.113.0/24",
		"CUBICLE_NETWORK_DIAL_NETNS="+in.Netns, "CUBICLE_NETWORK_RESOLVER="+egresstest.DNS.String()+":53",
		"CUBICLE_NETWORK_RECHECK_SECONDS=1"))
	org := s.firstOrg(t)
	// The organisation switch is off by default.
	if r := s.do("POST", "/v1/computers", `{"network_policy":{"type":"allowlist","allowed_domains":["allowed.test"]}}`); r.code != 403 || !strings.Contains(string(r.body), "has not turned on computer_internet") {
		t.Fatalf("an internet computer before the organisation's switch: %d %s", r.code, r.body)
	}
	s.decode("PATCH", "/v1/admin/orgs/"+org, `{"computer_internet":true}`, 200, nil)
	var view struct {
		ID     string `json:"id"`
		Limits struct {
			NetworkPolicy *struct {
				Type           string   `json:"type"`
				AllowedDomains []string `json:"allowed_domains"`
			} `json:"network_policy"`
		} `json:"limits"`
	}
	s.decode("POST", "/v1/computers", `{"network_policy":{"type":"allowlist","allowed_domains":["allowed.test"]}}`, 201, &view)
	if np := view.Limits.NetworkPolicy; np == nil || np.Type != "allowlist" || len(np.AllowedDomains) != 1 {
		t.Fatalf("the computer's view: %+v", view)
	}
	if out := s.exec(t, view.ID, "curl -sS --max-time 10 http://allowed.test/; curl -sS --noproxy '*' --max-time 10 http://other.test/"); !strings.Contains(out, "hello allowed.test from 198.51.100.10") || !strings.Contains(out, "Could not resolve host: other.test") {
		t.Errorf("allowed.test and other.test from the internet computer: %s", out)
	}
	// A computer that asks for nothing has only loopback.
	var plain struct {
		ID string `json:"id"`
	}
	s.decode("POST", "/v1/computers", `{}`, 201, &plain)
	if out := s.exec(t, plain.ID, "curl -sS --max-time 10 http://allowed.test/; cat /etc/resolv.conf"); !strings.Contains(out, "no network") || strings.Contains(out, "hello") {
		t.Errorf("a computer without a network policy: %s", out)
	}
	for body, want := range map[string]string{
		`{"network_policy":{"type":"allowlist","allowed_domains":["example.com"]}}`:   `"example.com\" is not allowed on this deployment`,
		`{"network_policy":{"type":"allowlist","allowed_cidrs":["198.51.100.0/24"]}}`: `198.51.100.0/24 is not allowed on this deployment`,
		`{"network_policy":{"type":"allowlist"}}`:                                     `an allowlist needs at least one domain`,
		`{"network_policy":{"type":"open"}}`:                                          `network_policy.type must be`,
		`{"network_policy":{"type":"allowlist","allowed_domains":["bad name.test"]}}`: `not a domain name`,
	} {
		if r := s.do("POST", "/v1/computers", body); r.code != 400 || !strings.Contains(string(r.body), want) {
			t.Errorf("%s: %d %s (want 400 with %q)", body, r.code, r.body, want)
		}
	}
	// The egress log: the computer's records through the API (written in
	// batches, so polled), paged, and the organisation's by host.
	type page struct {
		Data []struct {
			ID, ComputerID, Host, Verdict, Rule, Protocol string
			BytesReceived                                 int64 `json:"bytes_received"`
		} `json:"data"`
		HasMore bool   `json:"has_more"`
		LastID  string `json:"last_id"`
	}
	var got page
	for deadline := time.Now().Add(10 * time.Second); ; {
		s.decode("GET", "/v1/computers/"+view.ID+"/egress?host=allowed.test", "", 200, &got)
		if len(got.Data) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	allowedConn := false
	for _, r := range got.Data {
		allowedConn = allowedConn || r.Protocol == "proxy" && r.Verdict == "allowed" && r.Rule == "domain:allowed.test" && r.BytesReceived > 0
	}
	if !allowedConn {
		t.Errorf("no allowed proxy record with bytes for allowed.test: %+v", got)
	}
	var refused page
	s.decode("GET", "/v1/computer-egress?host=other.test", "", 200, &refused)
	if len(refused.Data) == 0 || refused.Data[0].Verdict != "refused" || refused.Data[0].Protocol != "dns" {
		t.Errorf("the organisation's records for other.test: %+v", refused)
	}
	var first, next page
	s.decode("GET", "/v1/computer-egress?limit=1", "", 200, &first)
	s.decode("GET", "/v1/computer-egress?limit=1&after="+first.LastID, "", 200, &next)
	if len(first.Data) != 1 || !first.HasMore || len(next.Data) != 1 || next.Data[0].ID == first.Data[0].ID {
		t.Errorf("pages: %+v then %+v", first, next)
	}
	if r := s.do("GET", "/v1/computer-egress?after=12", ""); r.code != 400 || !strings.Contains(string(r.body), `"param":"after"`) {
		t.Errorf("a bad cursor: %d %s", r.code, r.body)
	}
	if r := s.do("GET", "/v1/computers/cmp_nosuch/egress", ""); r.code != 404 {
		t.Errorf("another computer's egress: %d %s", r.code, r.body)
	}
	// Turning the switch off takes the internet away from running
	// computers within recheck_seconds; they keep running.
	s.decode("PATCH", "/v1/admin/orgs/"+org, `{"computer_internet":false}`, 200, nil)
	var out string
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		// (A curl that ran just before the cut may have succeeded: only an
		// answer with neither the page nor the interface ends the wait.)
		if out = s.exec(t, view.ID, "curl -sS --max-time 5 http://allowed.test/ 2>&1; cat /proc/net/dev"); !strings.Contains(out, "eth0") && !strings.Contains(out, "hello") {
			break
		}
	}
	if strings.Contains(out, "hello") || strings.Contains(out, "eth0") {
		t.Errorf("after computer_internet off: %s", out)
	}
	if !strings.Contains(s.stderr.String(), "computer lost its internet") {
		t.Errorf("no log line for the lost internet:\n%s", s.stderr)
	}
}

// TestServeInternetOff: without [network] internet, a network policy is
// refused with 403 naming the setting.
func TestServeInternetOff(t *testing.T) {
	s := startServer(t, t.TempDir(), serveEnv("CUBICLE_ADMIN_KEY="+serveAdminKey))
	r := s.do("POST", "/v1/computers", `{"network_policy":{"type":"allowlist","allowed_domains":["example.com"]}}`)
	if r.code != 403 || !strings.Contains(string(r.body), "network.internet = false") {
		t.Errorf("a network policy on a deployment without internet: %d %s", r.code, r.body)
	}
}

// TestServeEgressRateLimited: past the organisation's connection rate a
// connection is refused, and the audit trail says
// computer.egress_rate_limited (never the host or what was sent).
func TestServeEgressRateLimited(t *testing.T) {
	in := egresstest.New(t)
	s := startServer(t, t.TempDir(), serveEnv("CUBICLE_ADMIN_KEY="+serveAdminKey,
		"CUBICLE_NETWORK_INTERNET=true", "CUBICLE_NETWORK_ALLOWED_DOMAINS=*.test",
		"CUBICLE_NETWORK_CONNS_PER_SECOND=0.01", "CUBICLE_NETWORK_CONNS_BURST=2",
		"CUBICLE_NETWORK_DIAL_NETNS="+in.Netns, "CUBICLE_NETWORK_RESOLVER="+egresstest.DNS.String()+":53"))
	var orgs struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	s.decode("GET", "/v1/admin/orgs", "", 200, &orgs)
	s.decode("PATCH", "/v1/admin/orgs/"+orgs.Data[0].ID, `{"computer_internet":true}`, 200, nil)
	var view struct {
		ID string `json:"id"`
	}
	s.decode("POST", "/v1/computers", `{"network_policy":{"type":"allowlist","allowed_domains":["allowed.test"]}}`, 201, &view)
	r := s.do("POST", "/v1/computers/"+view.ID+"/exec", `{"command":"for i in 1 2 3; do curl -sS --noproxy '*' --max-time 10 http://allowed.test/ 2>&1; done"}`)
	if r.code != 200 || strings.Count(string(r.body), "hello allowed.test") != 2 || !strings.Contains(string(r.body), "Couldn't connect") {
		t.Fatalf("three connections at a burst of two: %d %s", r.code, r.body)
	}
	var audit struct {
		Data []struct {
			Type       string          `json:"type"`
			ComputerID string          `json:"computer_id"`
			Data       json.RawMessage `json:"data"`
		} `json:"data"`
	}
	s.decode("GET", "/v1/audit?type=computer.egress_rate_limited", "", 200, &audit)
	if len(audit.Data) != 1 || audit.Data[0].ComputerID != view.ID || strings.Contains(string(audit.Data[0].Data), "allowed.test") {
		t.Errorf("audit: %+v", audit.Data)
	}
}

// TestServeDomainSecrets: an organisation's secret (set by an admin) and a
// computer's own (in its network_policy) reach the secret domain's server
// as headers, the computer's winning for the same header; no answer, egress
// record, audit row or server log shows a value, and the computer cannot
// see one.
func TestServeDomainSecrets(t *testing.T) {
	in := egresstest.New(t)
	in.Check(t)
	dir := t.TempDir()
	ca := filepath.Join(dir, "test-ca.pem")
	if err := os.WriteFile(ca, in.CAPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, t.TempDir(), serveEnv("CUBICLE_ADMIN_KEY="+serveAdminKey, "CUBICLE_LOG_LEVEL=debug",
		"CUBICLE_NETWORK_INTERNET=true", "CUBICLE_NETWORK_ALLOWED_DOMAINS=*.test",
		"CUBICLE_NETWORK_DIAL_NETNS="+in.Netns, "CUBICLE_NETWORK_RESOLVER="+egresstest.DNS.String()+":53",
		"CUBICLE_NETWORK_UPSTREAM_CA="+ca))
	const orgValue, orgOnly, mine = "Bearer org-value-5b1e", "org-only-77c3", "Bearer computer-value-d40a"
	org := s.firstOrg(t)
	s.decode("PATCH", "/v1/admin/orgs/"+org, `{"computer_internet":true}`, 200, nil)
	s.decode("POST", "/v1/admin/orgs/"+org+"/domain_secrets", `{"domain":"secret.test","name":"authorization","value":"`+orgValue+`"}`, 200, nil)
	s.decode("POST", "/v1/admin/orgs/"+org+"/domain_secrets", `{"domain":"secret.test","name":"X-Org","value":"`+orgOnly+`"}`, 200, nil)
	s.decode("POST", "/v1/admin/orgs/"+org+"/domain_secrets", `{"domain":"elsewhere.test","name":"X-Org","value":"`+orgOnly+`"}`, 200, nil)
	list := s.do("GET", "/v1/admin/orgs/"+org+"/domain_secrets", "")
	if list.code != 200 || !strings.Contains(string(list.body), `{"domain":"secret.test","name":"Authorization"}`) {
		t.Errorf("the organisation's secrets: %d %s", list.code, list.body)
	}
	if r := s.do("POST", "/v1/admin/orgs/"+org+"/domain_secrets", `{"domain":"secret.test","name":"Host","value":"x"}`); r.code != 400 {
		t.Errorf("a secret for Host: %d %s", r.code, r.body)
	}
	// Only the organisation's: both its headers.
	var a struct {
		ID string `json:"id"`
	}
	s.decode("POST", "/v1/computers", `{"network_policy":{"type":"allowlist","allowed_domains":["secret.test"]}}`, 201, &a)
	if out := s.exec(t, a.ID, "curl -sS --max-time 10 https://secret.test/"); !strings.Contains(out, "Authorization: "+orgValue) || !strings.Contains(out, "X-Org: "+orgOnly) {
		t.Errorf("with the organisation's secrets: %s", out)
	}
	// The computer's own wins for the same header; the organisation's
	// other header stays.
	create := s.do("POST", "/v1/computers", `{"network_policy":{"type":"allowlist","allowed_domains":["secret.test","spliced.test"],`+
		`"domain_secrets":[{"domain":"secret.test","name":"Authorization","value":"`+mine+`"}]}}`)
	if create.code != 201 {
		t.Fatalf("create: %d %s", create.code, create.body)
	}
	var b struct {
		ID string `json:"id"`
	}
	json.Unmarshal(create.body, &b)
	out := s.exec(t, b.ID, "curl -sS --max-time 10 https://secret.test/; python3 -c 'import urllib.request as u; print(u.urlopen(\"https://secret.test/py\", timeout=10).read().decode())'; env; cat /workspace/.cubicle/*")
	if strings.Count(out, "Authorization: "+mine) != 2 || !strings.Contains(out, "X-Org: "+orgOnly) || strings.Contains(out, orgValue) {
		t.Errorf("with the computer's own secret: %s", out)
	}
	if strings.Count(out, mine) != 2 {
		t.Errorf("the value is visible in the computer beyond the server's echo: %s", out)
	}
	// A secret for a domain the policy does not allow is a 400.
	if r := s.do("POST", "/v1/computers", `{"network_policy":{"type":"allowlist","allowed_domains":["secret.test"],"domain_secrets":[{"domain":"other.test","name":"K","value":"v"}]}}`); r.code != 400 ||
		!strings.Contains(string(r.body), "is not in allowed_domains") {
		t.Errorf("a secret outside allowed_domains: %d %s", r.code, r.body)
	}
	// Answers show names, never values.
	var egr struct {
		Data []json.RawMessage `json:"data"`
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		s.decode("GET", "/v1/computers/"+b.ID+"/egress?host=secret.test", "", 200, &egr)
		if len(egr.Data) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(egr.Data) == 0 {
		t.Error("no egress record for secret.test")
	}
	var answers []string
	for _, path := range []string{"/v1/computers/" + b.ID, "/v1/computers", "/v1/computer-egress", "/v1/admin/orgs/" + org + "/domain_secrets", "/v1/audit"} {
		r := s.do("GET", path, "")
		answers = append(answers, string(r.body))
	}
	answers = append(answers, string(create.body), s.stderr.String())
	for i, body := range answers {
		for _, v := range []string{orgValue, orgOnly, mine, "computer-value", "org-value"} {
			if strings.Contains(body, v) {
				t.Errorf("answer %d shows a secret value %q: %s", i, v, body)
			}
		}
	}
	if !strings.Contains(string(create.body), `"domain_secrets":[{"domain":"secret.test","name":"Authorization"},{"domain":"secret.test","name":"X-Org"}]`) {
		t.Errorf("the created computer's view: %s", create.body)
	}
	// An organisation's secret removed: computers created afterwards do
	// not get it.
	if r := s.do("DELETE", "/v1/admin/orgs/"+org+"/domain_secrets?domain=secret.test&name=x-org", ""); r.code != 204 {
		t.Errorf("delete: %d %s", r.code, r.body)
	}
	var c struct {
		ID string `json:"id"`
	}
	s.decode("POST", "/v1/computers", `{"network_policy":{"type":"allowlist","allowed_domains":["secret.test"]}}`, 201, &c)
	if out := s.exec(t, c.ID, "curl -sS --max-time 10 https://secret.test/"); strings.Contains(out, "X-Org") || !strings.Contains(out, "Authorization: ") {
		t.Errorf("after removing X-Org: %s", out)
	}
}

// exec runs a shell command in computer id through the API and returns
// the JSON answer.
func (s *server) exec(t *testing.T, id, cmd string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"command": cmd})
	r := s.do("POST", "/v1/computers/"+id+"/exec", string(body))
	if r.code != 200 {
		t.Fatalf("exec: %d %s", r.code, r.body)
	}
	return string(r.body)
}
