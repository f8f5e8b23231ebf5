package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/cubicle-sandbox/cubicle/internal/governance"
)

const keysUsage = `Usage: cubicle keys create|list|revoke|set [flags] [KEY]

Manages API keys in the server's database (works while the server runs;
$CUBICLE_STORE_URL names a PostgreSQL store, else the data directory's).
The secret of a new key is printed once. 'create --admin' makes an admin
key (every capability and the admin endpoints) in the first organisation
(or --org): the way back when the admin key is lost. --policy is the
key's policy ({"settings":{"regions_allow":[…],"region_exceptions":[…],
"providers_allow":[…],"hosts_allow":[…],"redact_pii":true}}); 'set
--policy JSON KEY' replaces it ('{}' clears it).

Examples:
  cubicle keys create --org org_123 --name reports --capabilities '{"tooling":{"system_tools":["computer"]},"computer":{"lifetime_seconds":600},"files":{},"artifacts":{}}'
  cubicle keys set --policy '{"settings":{"redact_pii":true}}' key_456
  cubicle keys create --admin --data /var/lib/cubicle --json
  cubicle keys list --json
  cubicle keys revoke key_456

Flags:
`

const orgsUsage = `Usage: cubicle orgs create|list|set [flags] [ORG]
       cubicle orgs secrets|secret-set|secret-rm [flags] ORG (domain secrets: cubicle orgs secrets --help)

Manages organisations in the server's database ($CUBICLE_STORE_URL names
a PostgreSQL store, else the data directory's). 'set ORG' changes an
organisation's switches: --internet on|off (computer_internet: its
computers may have internet where the deployment offers it; off by
default; computers that have it lose it within network.recheck_seconds),
--bulk-rows on|off (computer_internet_bulk_rows: datastore rows may be
delivered to its computers that reach the internet; off by default),
--computer on|off, and --policy JSON replaces its policy
({"settings":{"regions_allow":[…],"region_exceptions":["builtin:computer"],
"providers_allow":[…],"hosts_allow":[…],"redact_pii":true}}; '{}' clears it).

Examples:
  cubicle orgs create --name research --internet on
  cubicle orgs set --policy '{"settings":{"regions_allow":["eu-west"],"region_exceptions":["builtin:computer"]}}' org_3f9c1a7b2d4e6f80a1b2c3d4
  cubicle orgs create --name legacy --no-computer
  cubicle orgs set --internet off org_3f9c1a7b2d4e6f80a1b2c3d4
  cubicle orgs set --bulk-rows on org_3f9c1a7b2d4e6f80a1b2c3d4
  cubicle orgs list --json

Flags:
`

// openGovernance opens the database of a data directory.
func openGovernance(ctx context.Context, data string) (*governance.Service, func(), error) {
	st, err := openCLIStore(ctx, data)
	if err != nil {
		return nil, nil, err
	}
	gov := governance.New(st)
	return gov, func() { gov.CloseAudit(ctx); st.Close() }, nil
}

func printOut(asJSON bool, v any, text string) {
	if asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		enc.Encode(v)
		return
	}
	fmt.Print(text)
}

// subcommand parses "<verb> [flags]" and returns the verb, or an exit code.
func subcommand(fs *flag.FlagSet, args []string, verbs ...string) (string, int, bool) {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		if code, ok := parse(fs, []string{"--help"}); !ok {
			return "", code, false
		}
	}
	for _, v := range verbs {
		if args[0] == v {
			code, ok := parse(fs, args[1:])
			return v, code, ok
		}
	}
	fmt.Fprintf(os.Stderr, "cubicle %s: unknown subcommand %q (want one of %v)\n", fs.Name(), args[0], verbs)
	return "", 2, false
}

func keysCmd(args []string) int {
	fs := newFlags("keys", keysUsage)
	org := fs.String("org", "", "organisation id (create; list filter)")
	name := fs.String("name", "", "name of the new key")
	caps := fs.String("capabilities", `{"tooling":{"system_tools":["computer"]},"computer":{},"files":{},"artifacts":{}}`, "capabilities JSON")
	data := fs.String("data", defaultData, "data directory of the server")
	asJSON := fs.Bool("json", false, "print JSON")
	admin := fs.Bool("admin", false, "create an admin key (--org defaults to the first organisation; --capabilities does not apply)")
	policyFlag := fs.String("policy", "", `the key's policy JSON, {"settings":{…}} (create, set)`)
	verb, code, ok := subcommand(fs, args, "create", "list", "revoke", "set")
	if !ok {
		return code
	}
	pol, err := policyOf(*policyFlag)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cubicle keys %s: --policy: %v\n", verb, err)
		return 2
	}
	ctx := context.Background()
	gov, done, err := openGovernance(ctx, *data)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cubicle keys: %v\n", err)
		return 1
	}
	defer done()
	switch verb {
	case "create":
		if *admin && pol != nil {
			fmt.Fprintln(os.Stderr, "cubicle keys create: --policy does not apply to --admin (an admin key is the way back in); set it afterwards with 'cubicle keys set --policy JSON KEY'")
			return 2
		}
		if *admin {
			return createAdminKey(ctx, gov, *org, *name, *asJSON)
		}
		if *org == "" {
			fmt.Fprintln(os.Stderr, "cubicle keys create: --org is required (see 'cubicle orgs list')")
			return 2
		}
		c, err := governance.ParseCapabilities([]byte(*caps))
		if err != nil {
			fmt.Fprintf(os.Stderr, "cubicle keys create: --capabilities: %v\n", err)
			return 2
		}
		k, secret, err := gov.CreateKeyWithPolicy(ctx, *org, *name, c, deref(pol))
		if err != nil {
			fmt.Fprintf(os.Stderr, "cubicle keys create: %v\n", err)
			return 1
		}
		printOut(*asJSON, map[string]any{"key": k, "secret": secret},
			fmt.Sprintf("created %s in %s\nsecret (shown once): %s\n", k.ID, k.OrgID, secret))
	case "list":
		keys, err := gov.ListKeys(ctx, *org)
		if err != nil {
			fmt.Fprintf(os.Stderr, "cubicle keys list: %v\n", err)
			return 1
		}
		text := ""
		for _, k := range keys {
			state := "active"
			if k.RevokedAt != nil {
				state = "revoked"
			}
			text += fmt.Sprintf("%s  %s  %-8s %s…  %s\n", k.ID, k.OrgID, state, k.Prefix, k.Name)
		}
		printOut(*asJSON, keys, text)
	case "revoke":
		if fs.NArg() != 1 {
			fmt.Fprintln(os.Stderr, "cubicle keys revoke: give exactly one key id")
			return 2
		}
		if err := gov.RevokeKey(ctx, fs.Arg(0)); err != nil {
			fmt.Fprintf(os.Stderr, "cubicle keys revoke: %v\n", err)
			return 1
		}
		printOut(*asJSON, map[string]string{"revoked": fs.Arg(0)}, "revoked "+fs.Arg(0)+"\n")
	case "set":
		if fs.NArg() != 1 || pol == nil {
			fmt.Fprintln(os.Stderr, "cubicle keys set: name one key and its policy (cubicle keys set --policy JSON KEY)")
			return 2
		}
		k, err := gov.SetKeyPolicy(ctx, fs.Arg(0), *pol)
		if err != nil {
			fmt.Fprintf(os.Stderr, "cubicle keys set: %v\n", err)
			return 1
		}
		printOut(*asJSON, k, fmt.Sprintf("%s  policy=%s\n", k.ID, k.Policy))
	}
	return 0
}

// policyOf reads a --policy flag; nil when it was not given.
func policyOf(v string) (*governance.Policy, error) {
	if v == "" {
		return nil, nil
	}
	p, err := governance.ParsePolicy([]byte(v))
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// deref is *p, or the empty policy.
func deref(p *governance.Policy) governance.Policy {
	if p == nil {
		return governance.Policy{}
	}
	return *p
}

func orgsCmd(args []string) int {
	if len(args) > 0 && strings.HasPrefix(args[0], "secret") {
		return orgSecretsCmd(args)
	}
	fs := newFlags("orgs", orgsUsage)
	name := fs.String("name", "", "name of the new organisation")
	noComputer := fs.Bool("no-computer", false, "do not allow computers in this organisation (create)")
	internetFlag := fs.String("internet", "", "on or off: the organisation's computer_internet switch (create, set)")
	computerFlag := fs.String("computer", "", "on or off: whether the organisation may have computers (set)")
	bulkFlag := fs.String("bulk-rows", "", "on or off: the organisation's computer_internet_bulk_rows switch (create, set)")
	policyFlag := fs.String("policy", "", `the organisation's policy JSON, {"settings":{…}} (create, set)`)
	data := fs.String("data", defaultData, "data directory of the server")
	asJSON := fs.Bool("json", false, "print JSON")
	verb, code, ok := subcommand(fs, args, "create", "list", "set")
	if !ok {
		return code
	}
	var computer, bulk *bool
	var pol *governance.Policy
	internet, err := onOff("internet", *internetFlag)
	if err == nil {
		computer, err = onOff("computer", *computerFlag)
	}
	if err == nil {
		bulk, err = onOff("bulk-rows", *bulkFlag)
	}
	if err == nil {
		if pol, err = policyOf(*policyFlag); err != nil {
			err = fmt.Errorf("--policy: %w", err)
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "cubicle orgs %s: %v\n", verb, err)
		return 2
	}
	ctx := context.Background()
	gov, done, err := openGovernance(ctx, *data)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cubicle orgs: %v\n", err)
		return 1
	}
	defer done()
	switch verb {
	case "set":
		if fs.NArg() != 1 || (internet == nil && computer == nil && bulk == nil && pol == nil) {
			fmt.Fprintln(os.Stderr, "cubicle orgs set: name one organisation and what to change (cubicle orgs set [--internet on|off] [--bulk-rows on|off] [--computer on|off] [--policy JSON] ORG)")
			return 2
		}
		org, err := gov.UpdateOrg(ctx, fs.Arg(0), governance.OrgSettings{AllowComputer: computer, ComputerInternet: internet,
			ComputerInternetBulkRows: bulk, Policy: pol})
		if err != nil {
			fmt.Fprintf(os.Stderr, "cubicle orgs set: %v\n", err)
			return 1
		}
		printOut(*asJSON, org, fmt.Sprintf("%s  computer=%t internet=%t bulk_rows=%t policy=%s\n", org.ID, org.AllowComputer,
			org.ComputerInternet, org.ComputerInternetBulkRows, org.Policy))
	case "create":
		org, err := gov.CreateOrg(ctx, *name, governance.OrgSettings{AllowComputer: new(!*noComputer), ComputerInternet: internet,
			ComputerInternetBulkRows: bulk, Policy: pol})
		if err != nil {
			fmt.Fprintf(os.Stderr, "cubicle orgs create: --name: %v\n", err)
			return 2
		}
		printOut(*asJSON, org, fmt.Sprintf("created %s (%s)\n", org.ID, org.Name))
	case "list":
		orgs, err := gov.ListOrgs(ctx)
		if err != nil {
			fmt.Fprintf(os.Stderr, "cubicle orgs list: %v\n", err)
			return 1
		}
		text := ""
		for _, o := range orgs {
			text += fmt.Sprintf("%s  computer=%-5t internet=%-5t %s\n", o.ID, o.AllowComputer, o.ComputerInternet, o.Name)
		}
		printOut(*asJSON, orgs, text)
	}
	return 0
}

// createAdminKey is 'cubicle keys create --admin'.
func createAdminKey(ctx context.Context, gov *governance.Service, org, name string, asJSON bool) int {
	k, secret, err := gov.CreateAdminKey(ctx, org, name)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cubicle keys create --admin: %v\n", err)
		return 1
	}
	printOut(asJSON, map[string]any{"key": k, "secret": secret},
		fmt.Sprintf("created admin key %s in %s\nsecret (shown once): %s\n", k.ID, k.OrgID, secret))
	return 0
}

// onOff reads an on|off flag; nil when it was not given.
func onOff(name, v string) (*bool, error) {
	switch v {
	case "":
		return nil, nil
	case "on":
		return new(true), nil
	case "off":
		return new(false), nil
	}
	return nil, fmt.Errorf("--%s must be on or off, got %q", name, v)
}
