package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/egress/egresstest"
)

// as is s calling with another key.
func (s *server) as(key string) *server {
	c := *s
	c.key = key
	return &c
}

// newComputerKey creates a key with the computer capability in org and
// returns its id and secret.
func (s *server) newComputerKey(t *testing.T, org string) (id, secret string) {
	t.Helper()
	var k struct {
		Key struct {
			ID string `json:"id"`
		} `json:"key"`
		Secret string `json:"secret"`
	}
	s.decode("POST", "/v1/admin/keys", `{"org_id":"`+org+`","name":"k","capabilities":{"tooling":{"system_tools":["computer"]},"computer":{}}}`, 201, &k)
	return k.Key.ID, k.Secret
}

// online reports whether computer id reaches allowed.test right now, and
// whether it still has its interface.
func (s *server) online(t *testing.T, id string) (page, iface bool) {
	t.Helper()
	out := s.exec(t, id, "curl -sS --noproxy '*' --max-time 5 http://allowed.test/ 2>&1; cat /proc/net/dev")
	return strings.Contains(out, "hello allowed.test"), strings.Contains(out, "eth0")
}

// withheldEvents are the computer.internet_withheld audit rows of a
// computer.
func (s *server) withheldEvents(t *testing.T, id string) []map[string]any {
	t.Helper()
	var a struct {
		Data []struct {
			ComputerID string         `json:"computer_id"`
			Data       map[string]any `json:"data"`
		} `json:"data"`
	}
	s.decode("GET", "/v1/audit?type=computer.internet_withheld", "", 200, &a)
	var out []map[string]any
	for _, e := range a.Data {
		if e.ComputerID == id {
			out = append(out, e.Data)
		}
	}
	return out
}

const allowedOnly = `{"network_policy":{"type":"allowlist","allowed_domains":["allowed.test"]}}`

// onlineComputer switches the first organisation's computer_internet on
// and makes, with a new computer key of it, an internet computer that is
// online: the organisation, the key's id, the key's client and the
// computer.
func (s *server) onlineComputer(t *testing.T) (org, kid string, b *server, c struct {
	ID string `json:"id"`
}) {
	t.Helper()
	org = s.firstOrg(t)
	s.decode("PATCH", "/v1/admin/orgs/"+org, `{"computer_internet":true}`, 200, nil)
	kid, ksec := s.newComputerKey(t, org)
	b = s.as(ksec)
	b.decode("POST", "/v1/computers", allowedOnly, 201, &c)
	if page, iface := b.online(t, c.ID); !page || !iface {
		t.Fatalf("the internet computer is not online: page %v, interface %v", page, iface)
	}
	return org, kid, b, c
}

// TestServeInternetCutByPolicy (issue 13): a running internet computer
// whose organisation or key gets a policy that withholds internet
// computers loses its internet at the next call on it, before that call
// runs, whoever makes it (the recheck is an hour away here): the
// organisation's policy, the computer's own key's policy when another key
// calls, and, on a deployment with only internet computers, at a call the
// gate answers "Denied by policy.". Each cut is audited
// (computer.internet_withheld) and the computer keeps running.
func TestServeInternetCutByPolicy(t *testing.T) {
	in := egresstest.New(t)
	in.Check(t)
	env := func(extra ...string) []string {
		return serveEnv(append([]string{"CUBICLE_ADMIN_KEY=" + serveAdminKey,
			"CUBICLE_NETWORK_INTERNET=true", "CUBICLE_NETWORK_ALLOWED_DOMAINS=*.test",
			"CUBICLE_NETWORK_DIAL_NETNS=" + in.Netns, "CUBICLE_NETWORK_RESOLVER=" + egresstest.DNS.String() + ":53",
			"CUBICLE_NETWORK_RECHECK_SECONDS=3600"}, extra...)...)
	}
	// The server's first recheck runs at its reaper's first tick (0.5 s
	// after it starts), the next one an hour later: a policy changed after
	// settle() can only be seen by the calls.
	settle := func() { time.Sleep(1500 * time.Millisecond) }
	t.Run("internet", func(t *testing.T) {
		s := startServer(t, t.TempDir(), env())
		org, kid, _, c := s.onlineComputer(t)
		settle()

		// The computer's own key turns restrictive; another key (the
		// admin's, unrestricted) makes the next call.
		s.decode("PATCH", "/v1/admin/keys/"+kid, `{"policy":{"settings":{"redact_pii":true}}}`, 200, nil)
		if page, iface := s.online(t, c.ID); page || iface {
			t.Errorf("the first call after the computer's key turned restrictive ran online: page %v, interface %v", page, iface)
		}
		if evs := s.withheldEvents(t, c.ID); len(evs) != 1 || evs[0]["setting"] != "redact_pii" || evs[0]["policy"] != "key" || evs[0]["key_id"] != kid {
			t.Errorf("audit of the cut: %+v", evs)
		}

		// The organisation's policy turns restrictive: the next call (the
		// creating key's own) runs offline.
		var a struct {
			ID string `json:"id"`
		}
		s.decode("POST", "/v1/computers", allowedOnly, 201, &a)
		if page, iface := s.online(t, a.ID); !page || !iface {
			t.Fatalf("the internet computer is not online: page %v, interface %v", page, iface)
		}
		s.decode("PATCH", "/v1/admin/orgs/"+org, `{"policy":{"settings":{"hosts_allow":["api.example.com"]}}}`, 200, nil)
		if page, iface := s.online(t, a.ID); page || iface {
			t.Errorf("the first call after the organisation's policy turned restrictive ran online: page %v, interface %v", page, iface)
		}
		if evs := s.withheldEvents(t, a.ID); len(evs) != 1 || evs[0]["setting"] != "hosts_allow" || evs[0]["policy"] != "organisation" {
			t.Errorf("audit of the cut: %+v", evs)
		}
		// A policy that allows again does not bring the internet back.
		s.decode("PATCH", "/v1/admin/orgs/"+org, `{"policy":{}}`, 200, nil)
		if page, iface := s.online(t, a.ID); page || iface {
			t.Errorf("after the policy was cleared: page %v, interface %v", page, iface)
		}
		if !strings.Contains(s.stderr.String(), "computer lost its internet") {
			t.Errorf("no log line for the lost internet:\n%s", s.stderr)
		}
	})
	t.Run("only internet", func(t *testing.T) {
		s := startServer(t, t.TempDir(), env("CUBICLE_NETWORK_ONLY_INTERNET=true"))
		_, kid, b, c := s.onlineComputer(t)
		settle()
		// The key turns restrictive: its call is Denied by policy., and
		// the computer's internet is gone with that call.
		s.decode("PATCH", "/v1/admin/keys/"+kid, `{"policy":{"settings":{"providers_allow":["openai"]}}}`, 200, nil)
		r := b.do("POST", "/v1/computers/"+c.ID+"/exec", `{"command":"true"}`)
		var e struct {
			Error struct {
				Code, Message string
			} `json:"error"`
		}
		json.Unmarshal(r.body, &e)
		if r.code != 403 || e.Error.Code != "denied_by_policy" || e.Error.Message != "Denied by policy." {
			t.Fatalf("a call under a restrictive policy: %d %s", r.code, r.body)
		}
		if evs := s.withheldEvents(t, c.ID); len(evs) != 1 || evs[0]["setting"] != "providers_allow" {
			t.Errorf("audit of the cut: %+v", evs)
		}
		// The admin's key may still use the computer: it runs offline.
		if page, iface := s.online(t, c.ID); page || iface {
			t.Errorf("after the refused call: page %v, interface %v", page, iface)
		}
	})
}
