package datastore

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Config is the deployment's datastores, its named queries and the limits
// of rows delivered to computers.
type Config struct {
	Datastores []Source
	SQLTools   []SQLTool
	// DeliverMaxRows and DeliverMaxBytes bound one delivery (defaults
	// 1,000,000 rows, 64 MiB of CSV); DeliverConcurrency is how many
	// deliveries run at once in this server (default 4).
	DeliverMaxRows     int64
	DeliverMaxBytes    int64
	DeliverConcurrency int
}

// Source is one datastore: a SQLite file (Path) or a PostgreSQL database
// (DSN), offered as the tool <Name>__query.
type Source struct {
	Name        string
	Description string
	Path        string // a SQLite file, opened read-only
	DSN         string // postgres://… (read-only transactions)
	// MaxRows bounds a query's answer to the model (default 100); a
	// delivery is bounded by Config's limits instead.
	MaxRows int
	// Timeout bounds one query (default 30 s).
	Timeout time.Duration
	// Orgs are the organisations offered its tools (empty: every one).
	Orgs []string
}

// SQLTool is an operator's named query on a datastore, offered as
// sql__<Name>. Params name its placeholders in order (? for SQLite, $1…
// for PostgreSQL); each is a string argument (or null) of the tool.
type SQLTool struct {
	Name        string
	Description string
	Datastore   string
	Query       string
	Params      []string
	MaxRows     int // default: the datastore's
}

// Defaults of Config and Source.
const (
	DefaultDeliverMaxRows     = 1_000_000
	DefaultDeliverMaxBytes    = 64 << 20
	DefaultDeliverConcurrency = 4
	DefaultMaxRows            = 100
	DefaultTimeout            = 30 * time.Second
	// MaxAnswerRows bounds any max_rows: an answer the model reads is
	// small, bulk rows are delivered.
	MaxAnswerRows = 10_000
)

// QuerySuffix ends a datastore's query tool; SQLPrefix starts a named query.
const (
	QuerySuffix = "__query"
	SQLPrefix   = "sql__"
)

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,47}$`)

// withDefaults fills the zero limits.
func (c Config) withDefaults() Config {
	if c.DeliverMaxRows <= 0 {
		c.DeliverMaxRows = DefaultDeliverMaxRows
	}
	if c.DeliverMaxBytes <= 0 {
		c.DeliverMaxBytes = DefaultDeliverMaxBytes
	}
	if c.DeliverConcurrency <= 0 {
		c.DeliverConcurrency = DefaultDeliverConcurrency
	}
	return c
}

// Validate checks the configuration; an error names the entry and key
// (datastores[1].dsn: …).
func (c Config) Validate() error {
	names := map[string]bool{}
	for i, s := range c.Datastores {
		at := fmt.Sprintf("datastores[%d]", i)
		switch {
		case !nameRE.MatchString(s.Name) || strings.Contains(s.Name, "__"):
			return fmt.Errorf("%s.name: %q is not a name (a-z, 0-9 and single _, at most 48, starting with a letter)", at, s.Name)
		case names[s.Name]:
			return fmt.Errorf("%s.name: %q is used twice", at, s.Name)
		case (s.Path == "") == (s.DSN == ""):
			return fmt.Errorf("%s: give either path (a SQLite file) or dsn (postgres://…)", at)
		case s.DSN != "" && !strings.HasPrefix(s.DSN, "postgres://") && !strings.HasPrefix(s.DSN, "postgresql://"):
			return fmt.Errorf("%s.dsn: not a postgres:// URL", at)
		case s.MaxRows < 0 || s.MaxRows > MaxAnswerRows:
			return fmt.Errorf("%s.max_rows: %d is not 0 (the default, %d) to %d", at, s.MaxRows, DefaultMaxRows, MaxAnswerRows)
		}
		names[s.Name] = true
	}
	tools := map[string]bool{}
	for i, t := range c.SQLTools {
		at := fmt.Sprintf("sql_tools[%d]", i)
		switch {
		case !nameRE.MatchString(t.Name):
			return fmt.Errorf("%s.name: %q is not a name (a-z, 0-9 and _, at most 48, starting with a letter)", at, t.Name)
		case tools[t.Name]:
			return fmt.Errorf("%s.name: %q is used twice", at, t.Name)
		case !names[t.Datastore]:
			return fmt.Errorf("%s.datastore: %q is no datastore of gateway.datastores", at, t.Datastore)
		case !Reads(t.Query):
			return fmt.Errorf("%s.query: datastores are read-only: a query starts with SELECT, WITH, VALUES or TABLE", at)
		case t.MaxRows < 0 || t.MaxRows > MaxAnswerRows:
			return fmt.Errorf("%s.max_rows: %d is not 0 (the datastore's) to %d", at, t.MaxRows, MaxAnswerRows)
		}
		for j, p := range t.Params {
			if !nameRE.MatchString(p) || p == "max_rows" {
				return fmt.Errorf("%s.params[%d]: %q is not a parameter name", at, j, p)
			}
		}
		tools[t.Name] = true
	}
	return nil
}

// Reads reports whether query is a reading statement by its first word
// (comments skipped). The database enforces read-only in any case; this
// only keeps a writing query out of the configuration.
func Reads(query string) bool {
	q := strings.TrimSpace(query)
	for {
		switch {
		case strings.HasPrefix(q, "--"):
			_, rest, _ := strings.Cut(q, "\n")
			q = strings.TrimSpace(rest)
			continue
		case strings.HasPrefix(q, "/*"):
			_, rest, ok := strings.Cut(q, "*/")
			if !ok {
				return false
			}
			q = strings.TrimSpace(rest)
			continue
		}
		break
	}
	f := strings.Fields(strings.TrimLeft(q, "("))
	if len(f) == 0 {
		return false
	}
	word, _, _ := strings.Cut(f[0], "(")
	switch strings.ToUpper(word) {
	case "SELECT", "WITH", "VALUES", "TABLE":
		return true
	}
	return false
}
