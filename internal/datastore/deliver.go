package datastore

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/governance"
	"github.com/cubicle-sandbox/cubicle/internal/log"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/tools"
)

// ResultsDir is where delivered rows go in the computer.
const ResultsDir = tools.Workspace + "/results"

// The sentences of a delivery that read nothing.
const (
	// InternetRefusedSentence: the computer reaches the internet and the
	// organisation has not turned on computer_internet_bulk_rows.
	InternetRefusedSentence = "Rows are not delivered to a computer that reaches the internet unless the organisation allows it with its computer_internet_bulk_rows setting."
	// BusySentence: the server runs as many deliveries as it allows.
	BusySentence = "Too many rows are being delivered to computers right now; nothing was read. Call the tool again shortly."
)

// Delivered is what the model reads of a delivery.
type Delivered struct {
	Columns   []string `json:"columns"`
	RowCount  int64    `json:"row_count"`
	Truncated bool     `json:"truncated"`
	Path      string   `json:"path"`
}

// callIDRE is a call id that can be a file name as it is.
var callIDRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// ResultPath is where the rows of call callID go; a call id that cannot be
// a file name (the upstream chose it) is replaced by fallback.
func ResultPath(callID, fallback string) string {
	if !callIDRE.MatchString(callID) {
		callID = fallback
	}
	return ResultsDir + "/" + callID + ".csv"
}

// Call is one call of a tool that delivers: the tool, the turn's
// computer, the model's call id (the file's name; ItemID replaces one
// that cannot be a file name) and the arguments.
type Call struct {
	Tool, ComputerID, CallID, ItemID string
	Args                             json.RawMessage
}

// Deliver runs c and writes its rows, up to the deployment's limits, into
// the computer at ResultPath as CSV with a header row; the model reads a
// Delivered. On a computer that reaches the internet it reads nothing
// unless p's organisation turned on computer_internet_bulk_rows (the
// refusal is audited as datastore.delivery_refused). Errors are the
// computer's failures; the tool's are sentences in the Result.
func (s *Service) Deliver(ctx context.Context, p governance.Principal, c Call) (tools.Result, error) {
	name, computerID, args, path := c.Tool, c.ComputerID, c.Args, ResultPath(c.CallID, c.ItemID)
	t, ok := s.tools[name]
	if _, offered := s.Lookup(p, name); !ok || !offered {
		return tools.Result{Output: tools.UnknownTool(name), Failed: true}, nil
	}
	query, qargs, msg := t.statement(args)
	if msg != "" {
		return tools.Result{Output: msg, Failed: true}, nil
	}
	v, err := s.comp.Get(ctx, p, computerID)
	if err != nil {
		return tools.Result{}, fmt.Errorf("datastore: the computer of a delivery: %w", err)
	}
	if reachesInternet(v) && !p.Org.ComputerInternetBulkRows {
		s.audit.Record(ctx, p, "datastore.delivery_refused", computerID, map[string]any{"tool": name,
			"reason": "the computer reaches the internet and computer_internet_bulk_rows is off"})
		return tools.Result{Output: InternetRefusedSentence, Failed: true}, nil
	}
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	default:
		return tools.Result{Output: BusySentence, Failed: true}, nil
	}
	var d Delivered
	var qerr error
	err = s.comp.WithSandbox(ctx, p, computerID, func(sb sandbox.Sandbox) error {
		d, qerr = s.write(ctx, sb, t, query, qargs, path)
		return nil
	})
	switch {
	case err != nil:
		return tools.Result{}, fmt.Errorf("datastore: deliver into the computer: %w", err)
	case errors.As(qerr, new(writeError)):
		// What the model did to the workspace (results made a file, a
		// full disk) is a sentence; the computer's failure an error.
		res, err := tools.FileError(qerr, path)
		if err != nil {
			return tools.Result{}, fmt.Errorf("datastore: write the rows into the computer: %w", err)
		}
		return res, nil
	case qerr != nil:
		log.From(ctx).InfoContext(ctx, "datastore: a delivery failed", "tool", name, "err", qerr)
		return tools.Result{Output: sentence(p, queryFailed(ctx, t.src, qerr)), Failed: true}, nil
	}
	b, _ := json.Marshal(d)
	return tools.Result{Output: string(b)}, nil
}

// reachesInternet: the computer has a network policy other than disabled.
func reachesInternet(v computer.View) bool {
	return v.Limits.NetworkPolicy != nil && v.Limits.NetworkPolicy.Type != computer.PolicyDisabled
}

// writeError is a failure to write into the computer (not the query's).
type writeError struct{ error }

func (e writeError) Unwrap() error { return e.error }

// write streams the query's rows as CSV into the file at path (which
// appears only when complete).
func (s *Service) write(ctx context.Context, sb sandbox.Files, t *tool, query string, args []any, path string) (Delivered, error) {
	d := Delivered{Columns: []string{}, Path: path}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := io.Pipe()
	wrote := make(chan error, 1)
	go func() {
		_, err := sb.WriteFile(ctx, sandbox.FileWrite{Path: path, Mode: 0o644, Parents: true}, pr)
		pr.CloseWithError(err) // a failed write ends the query's writes
		wrote <- err
	}()
	err := t.src.query(ctx, query, args, func(rows *sql.Rows) error {
		cols, err := columnsOf(rows)
		if err != nil {
			return err
		}
		d.Columns = names(cols)
		var buf bytes.Buffer
		cw := csv.NewWriter(&buf)
		cw.Write(d.Columns)
		cw.Flush()
		size := int64(buf.Len())
		if _, err := pw.Write(buf.Bytes()); err != nil {
			return writeError{err}
		}
		cells := make([]string, len(cols))
		for rows.Next() {
			if d.RowCount == s.cfg.DeliverMaxRows {
				d.Truncated = true
				return nil
			}
			vals, err := scanRow(rows, len(cols))
			if err != nil {
				return err
			}
			for i, v := range vals {
				cells[i] = csvValue(v, cols[i])
			}
			buf.Reset()
			cw.Write(cells)
			cw.Flush()
			if size+int64(buf.Len()) > s.cfg.DeliverMaxBytes {
				d.Truncated = true
				return nil
			}
			if _, err := pw.Write(buf.Bytes()); err != nil {
				return writeError{err}
			}
			size += int64(buf.Len())
			d.RowCount++
		}
		return nil
	})
	if err != nil {
		pw.CloseWithError(err)
		<-wrote
		return d, err
	}
	pw.Close()
	if err := <-wrote; err != nil {
		return d, writeError{err}
	}
	return d, nil
}
