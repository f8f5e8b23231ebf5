package e2b_test

import (
	"context"
	"os"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/config"
	"github.com/cubicle-sandbox/cubicle/internal/e2b"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/httpapi"
	"github.com/cubicle-sandbox/cubicle/internal/httpapi/httpapitest"
	"github.com/cubicle-sandbox/cubicle/internal/testbin"
)

// agentBin is the real cubicle binary computers run as their agent.
var agentBin string

func TestMain(m *testing.M) {
	os.Exit(testbin.Main(m, &agentBin))
}

const adminSecret = "cub_test_admin_secret_e2b01"

// server is the real REST API with the E2B mount (real SQLite, linux
// driver and computers, real HTTP).
type server struct {
	t   *testing.T
	url string // the E2B prefix's URL
	gov *governance.Service
	org string
}

func newServer(t *testing.T) *server {
	t.Helper()
	cfg := httpapitest.Config()
	cfg.Prelude = config.DefaultPrelude // matplotlib inline, as serve's default
	srv := httpapitest.StartMounted(t, agentBin, adminSecret, cfg, func(m *computer.Manager, g *governance.Service) httpapi.Mount {
		return e2b.New(m, g)
	})
	return &server{t: t, url: srv.URL + e2b.Prefix, gov: srv.Gov, org: srv.Admin.Org.ID}
}

// key makes a key of the admin's organisation with capabilities caps
// (JSON, the seed's shape) and returns its secret.
func (s *server) key(caps string) string {
	s.t.Helper()
	c, err := governance.ParseCapabilities([]byte(caps))
	if err != nil {
		s.t.Fatal(err)
	}
	_, secret, err := s.gov.CreateKey(context.Background(), s.org, "e2b-test", c)
	if err != nil {
		s.t.Fatal(err)
	}
	return secret
}

// otherOrgKey is a computer key of an organisation of its own.
func (s *server) otherOrgKey() string {
	s.t.Helper()
	org, err := s.gov.CreateOrg(context.Background(), "other", governance.OrgSettings{})
	if err != nil {
		s.t.Fatal(err)
	}
	c, _ := governance.ParseCapabilities([]byte(computerCaps))
	_, secret, err := s.gov.CreateKey(context.Background(), org.ID, "e2b-other", c)
	if err != nil {
		s.t.Fatal(err)
	}
	return secret
}

// computerCaps are the capabilities of a key that uses computers.
const computerCaps = `{"tooling":{"system_tools":["computer"]},"computer":{}}`
