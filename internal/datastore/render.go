package datastore

import (
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Binary is how a bytes value is written, in an answer and in a CSV.
const Binary = "[binary]"

// column is how one result column's values are written.
type column struct {
	name string
	typ  string // the database's type name, upper case (DATE, NUMERIC, BYTEA, BLOB…)
}

func columnsOf(rows *sql.Rows) ([]column, error) {
	cts, err := rows.ColumnTypes()
	if err != nil {
		return nil, err
	}
	out := make([]column, len(cts))
	for i, ct := range cts {
		out[i] = column{name: ct.Name(), typ: strings.ToUpper(ct.DatabaseTypeName())}
	}
	return out, nil
}

func names(cols []column) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = c.name
	}
	return out
}

// scanRow reads the current row as the drivers give it.
func scanRow(rows *sql.Rows, n int) ([]any, error) {
	vals := make([]any, n)
	ptrs := make([]any, n)
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	return vals, rows.Scan(ptrs...)
}

// jsonValue is v as the tool's answer writes it: numbers and booleans as
// they are, a decimal as text, a time as ISO 8601, bytes as [binary],
// null as null.
func jsonValue(v any, c column) any {
	if decimal(c.typ) && v != nil {
		return csvValue(v, c)
	}
	switch v := v.(type) {
	case nil, int64, float64, bool:
		return v
	case int32:
		return int64(v)
	}
	return text(v, c)
}

// csvValue is v as a CSV cell: the answer's text, an empty cell for null.
func csvValue(v any, c column) string {
	switch v := v.(type) {
	case nil:
		return ""
	case int64:
		return strconv.FormatInt(v, 10)
	case int32:
		return strconv.FormatInt(int64(v), 10)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	}
	return text(v, c)
}

// text writes a value that JSON has no type for.
func text(v any, c column) string {
	switch v := v.(type) {
	case string:
		return v
	case time.Time:
		if c.typ == "DATE" {
			return v.Format(time.DateOnly)
		}
		return v.UTC().Format(time.RFC3339Nano)
	case []byte:
		if textual(c.typ) && utf8.Valid(v) {
			return string(v)
		}
		return Binary
	case [16]byte: // a uuid
		return fmt.Sprintf("%x-%x-%x-%x-%x", v[0:4], v[4:6], v[6:8], v[8:10], v[10:16])
	case fmt.Stringer:
		return v.String()
	}
	return fmt.Sprint(v)
}

// decimal: a DECIMAL or NUMERIC column (SQLite gives its values as
// numbers; they are written as text like PostgreSQL's).
func decimal(typ string) bool {
	return strings.HasPrefix(typ, "DECIMAL") || strings.HasPrefix(typ, "NUMERIC")
}

// textual: a column whose bytes are text (JSON, numbers, text types), not
// a BLOB or bytea.
func textual(typ string) bool {
	switch typ {
	case "BYTEA", "BLOB", "":
		return false
	}
	return true
}
