package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
)

const orgSecretsUsage = `Usage: cubicle orgs secrets|secret-set|secret-rm [flags] ORG

Manages an organisation's domain secrets: HTTP headers Cubicle adds to its
internet computers' HTTPS requests to a domain, so code in a computer never
sees them (docs/network.md). 'secret-set' reads the value from standard
input (never from the command line, where other users could see it);
'secrets' lists domains and header names, never a value. Values are
sealed in the database with the key in <data>/secrets.key (made 0600 at
the first secret; keep it with backups of the database). Each change is
audited (org.domain_secret_created|replaced|deleted).

Examples:
  printf 'Bearer %s' "$TOKEN" | cubicle orgs secret-set --domain api.example.com --header Authorization org_3f9c…
  cubicle orgs secrets org_3f9c…
  cubicle orgs secret-rm --domain api.example.com --header Authorization org_3f9c…

Flags:
`

// orgSecretsCmd is 'cubicle orgs secrets|secret-set|secret-rm'.
func orgSecretsCmd(args []string) int {
	fs := newFlags("orgs", orgSecretsUsage)
	domain := fs.String("domain", "", "the domain (api.example.com or *.example.com)")
	header := fs.String("header", "", "the HTTP header's name")
	data := fs.String("data", defaultData, "data directory of the server")
	asJSON := fs.Bool("json", false, "print JSON")
	verb, code, ok := subcommand(fs, args, "secrets", "secret-set", "secret-rm")
	if !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(os.Stderr, "cubicle orgs %s: name one organisation\n", verb)
		return 2
	}
	org := fs.Arg(0)
	ctx := context.Background()
	st, err := openCLIStore(ctx, *data)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cubicle orgs: %v\n", err)
		return 1
	}
	defer st.Close()
	gov := governance.New(st) // changes are audited (via "cli", no key)
	defer gov.CloseAudit(ctx)
	switch verb {
	case "secrets":
		list, err := computer.OrgSecrets(ctx, st, org)
		if err != nil {
			fmt.Fprintf(os.Stderr, "cubicle orgs secrets: %v\n", err)
			return 1
		}
		text := ""
		for _, s := range list {
			text += s.Domain + "  " + s.Name + "\n"
		}
		printOut(*asJSON, list, text)
	case "secret-set":
		b, err := io.ReadAll(io.LimitReader(os.Stdin, 64<<10))
		if err != nil {
			fmt.Fprintf(os.Stderr, "cubicle orgs secret-set: read the value: %v\n", err)
			return 1
		}
		s, err := computer.SetOrgSecret(ctx, st, gov, governance.Principal{}, org, computer.DomainSecret{Domain: *domain, Name: *header, Value: strings.TrimRight(string(b), "\r\n")})
		if err != nil {
			fmt.Fprintf(os.Stderr, "cubicle orgs secret-set: %v\n", err)
			return 1
		}
		printOut(*asJSON, s, fmt.Sprintf("set %s for %s in %s\n", s.Name, s.Domain, org))
	case "secret-rm":
		if err := computer.DeleteOrgSecret(ctx, st, gov, governance.Principal{}, org, *domain, *header); err != nil {
			fmt.Fprintf(os.Stderr, "cubicle orgs secret-rm: %v\n", err)
			return 1
		}
		printOut(*asJSON, map[string]string{"removed": *header, "domain": *domain}, "removed "+*header+" for "+*domain+"\n")
	}
	return 0
}
