package datastore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/pii"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/tools"
)

// Computers is what a delivery asks of the computers service
// (*computer.Manager): whether the computer reaches the internet, and its
// files.
type Computers interface {
	Get(ctx context.Context, p governance.Principal, id string) (computer.View, error)
	WithSandbox(ctx context.Context, p governance.Principal, id string, fn func(sandbox.Sandbox) error) error
}

// Auditor records a refused delivery (*governance.Service).
type Auditor interface {
	Record(ctx context.Context, p governance.Principal, typ, computerID string, data map[string]any)
}

// Service holds the open datastores and their tools.
type Service struct {
	cfg   Config
	srcs  []*source
	tools map[string]*tool
	order []string // tool names in configuration order
	comp  Computers
	audit Auditor
	// slots bound the deliveries running at once.
	slots chan struct{}
}

// tool is one offered tool: a datastore's query tool (free SQL) or a
// named query.
type tool struct {
	def     tools.Tool
	src     *source
	query   string   // a named query's SQL ("": the model writes it)
	params  []string // a named query's parameters
	maxRows int
}

// New opens cfg's datastores (nothing connects before the first query).
// comp and audit serve deliveries to computers.
func New(cfg Config, comp Computers, audit Auditor) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s := &Service{cfg: cfg, tools: map[string]*tool{}, comp: comp, audit: audit, slots: make(chan struct{}, cfg.DeliverConcurrency)}
	bySource := map[string]*source{}
	for _, c := range cfg.Datastores {
		src, err := open(c)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.srcs = append(s.srcs, src)
		bySource[c.Name] = src
		s.add(&tool{def: queryTool(src.cfg, src.postgres), src: src, maxRows: src.cfg.MaxRows})
	}
	for _, t := range cfg.SQLTools {
		src := bySource[t.Datastore]
		n := t.MaxRows
		if n == 0 {
			n = src.cfg.MaxRows
		}
		s.add(&tool{def: namedTool(t, n), src: src, query: t.Query, params: t.Params, maxRows: n})
	}
	return s, nil
}

func (s *Service) add(t *tool) {
	s.tools[t.def.Name] = t
	s.order = append(s.order, t.def.Name)
}

// Close closes the databases.
func (s *Service) Close() error {
	var errs []error
	for _, src := range s.srcs {
		errs = append(errs, src.db.Close())
	}
	return errors.Join(errs...)
}

// Lookup is the tool name offered to p (false: no such tool, or its
// datastore is not offered to p's organisation).
func (s *Service) Lookup(p governance.Principal, name string) (tools.Tool, bool) {
	if s == nil {
		return tools.Tool{}, false
	}
	t, ok := s.tools[name]
	if !ok || (len(t.src.cfg.Orgs) > 0 && !slices.Contains(t.src.cfg.Orgs, p.Org.ID)) {
		return tools.Tool{}, false
	}
	return t.def, true
}

// Names lists the tools offered to p.
func (s *Service) Names(p governance.Principal) []string {
	var out []string
	for _, n := range s.order {
		if _, ok := s.Lookup(p, n); ok {
			out = append(out, n)
		}
	}
	return out
}

// Deliverable reports whether the tool name may deliver its rows to a
// computer: a reading named query or a datastore's query tool (every tool
// of this package: its datastores are read-only).
func (s *Service) Deliverable(p governance.Principal, name string) bool {
	_, ok := s.Lookup(p, name)
	return ok
}

// queryTool is a datastore's <name>__query tool.
func queryTool(c Source, postgres bool) tools.Tool {
	dialect := "SQLite"
	if postgres {
		dialect = "PostgreSQL"
	}
	desc := fmt.Sprintf("Run one read-only %s query (SELECT or WITH) on the datastore %s and answer its rows as JSON "+
		"(columns, rows, row_count, truncated; at most %d rows).", dialect, c.Name, c.MaxRows)
	if c.Description != "" {
		desc += " " + c.Description
	}
	return tools.Tool{Name: c.Name + QuerySuffix, Description: desc,
		Schema: json.RawMessage(`{"type":"object","properties":{"sql":{"type":"string","description":"one SELECT statement"}},"required":["sql"],"additionalProperties":false}`)}
}

// namedTool is an operator's sql__<name> tool: its parameters are strings
// or null.
func namedTool(t SQLTool, maxRows int) tools.Tool {
	props := map[string]any{}
	for _, p := range t.Params {
		props[p] = map[string]any{"type": []string{"string", "null"}}
	}
	schema, _ := json.Marshal(map[string]any{"type": "object", "properties": props,
		"required": append([]string{}, t.Params...), "additionalProperties": false})
	desc := t.Description
	if desc == "" {
		desc = "Run the query " + t.Name + " on the datastore " + t.Datastore + "."
	}
	desc += fmt.Sprintf(" Answers its rows as JSON (columns, rows, row_count, truncated; at most %d rows).", maxRows)
	return tools.Tool{Name: SQLPrefix + t.Name, Description: desc, Schema: schema}
}

// statement is the SQL and arguments of a call ("" and a sentence for the
// model when the arguments are bad).
func (t *tool) statement(args json.RawMessage) (string, []any, string) {
	if t.query == "" {
		var a struct {
			SQL string `json:"sql"`
		}
		if msg := tools.DecodeArgs(args, &a, "sql"); msg != "" {
			return "", nil, msg
		}
		if strings.TrimSpace(a.SQL) == "" {
			return "", nil, "Invalid arguments: sql must not be empty."
		}
		return a.SQL, nil, ""
	}
	var vals map[string]json.RawMessage
	if msg := tools.DecodeArgs(args, &vals); msg != "" {
		return "", nil, msg
	}
	for k := range vals {
		if !slices.Contains(t.params, k) {
			return "", nil, fmt.Sprintf("Invalid arguments: unknown field %q.", k)
		}
	}
	out := make([]any, len(t.params))
	for i, p := range t.params {
		raw := vals[p]
		if raw == nil || string(raw) == "null" {
			continue // null or left out: SQL NULL
		}
		var v string
		if json.Unmarshal(raw, &v) != nil {
			return "", nil, fmt.Sprintf("Invalid arguments: %s must be a string.", p)
		}
		out[i] = v
	}
	return t.query, out, ""
}

// Answer runs a call of the tool name and answers its rows as JSON (at
// most the tool's max_rows, and 32 KiB). A bad call or a failing query is
// a sentence in the Result, never an error.
func (s *Service) Answer(ctx context.Context, p governance.Principal, name string, args json.RawMessage) tools.Result {
	t, ok := s.tools[name]
	if _, offered := s.Lookup(p, name); !ok || !offered {
		return tools.Result{Output: tools.UnknownTool(name), Failed: true}
	}
	query, qargs, msg := t.statement(args)
	if msg != "" {
		return tools.Result{Output: msg, Failed: true}
	}
	ans, redact := answer{Rows: [][]any{}}, p.RedactsPII()
	err := t.src.query(ctx, query, qargs, func(rows *sql.Rows) error {
		cols, err := columnsOf(rows)
		if err != nil {
			return err
		}
		ans.Columns = names(cols)
		size := 0
		for rows.Next() {
			if len(ans.Rows) == t.maxRows {
				ans.Truncated = true
				return nil
			}
			vals, err := scanRow(rows, len(cols))
			if err != nil {
				return err
			}
			row := make([]any, len(vals))
			for i, v := range vals {
				row[i] = jsonValue(v, cols[i])
				if redact {
					row[i] = redacted(row[i])
				}
			}
			b, _ := json.Marshal(row)
			if size += len(b) + 1; size > tools.DefaultMaxAnswerBytes-1024 {
				ans.Truncated = true
				return nil
			}
			ans.Rows = append(ans.Rows, row)
		}
		return nil
	})
	if err != nil {
		// The database's message may quote a value.
		return tools.Result{Output: sentence(p, queryFailed(ctx, t.src, err)), Failed: true}
	}
	ans.RowCount = len(ans.Rows)
	b, _ := json.Marshal(ans)
	return tools.Result{Output: string(b)}
}

// answer is a query tool's ordinary answer.
type answer struct {
	Columns   []string `json:"columns"`
	Rows      [][]any  `json:"rows"`
	RowCount  int      `json:"row_count"`
	Truncated bool     `json:"truncated"`
}

// queryFailed is the sentence of a query the database refused or that
// ran out of time.
func queryFailed(ctx context.Context, src *source, err error) string {
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil || strings.Contains(err.Error(), "statement timeout") {
		return fmt.Sprintf("The query took longer than %d seconds.", int(src.cfg.Timeout.Seconds()))
	}
	return "The query failed: " + tools.CutUTF8(err.Error(), 1024)
}

// redacted is a value of the answer of a key that redacts personal data
// (governance.Principal.RedactsPII): a text with its data replaced, a
// number that is one (a card number kept as an integer) its placeholder.
func redacted(v any) any {
	switch v := v.(type) {
	case string:
		return pii.Redact(v)
	case int64:
		s := strconv.FormatInt(v, 10)
		if r := pii.Redact(s); r != s {
			return r
		}
	}
	return v
}

// sentence is a sentence of a tool's answer to p, redacted if p redacts
// personal data.
func sentence(p governance.Principal, s string) string {
	if p.RedactsPII() {
		return pii.Redact(s)
	}
	return s
}
