package datastore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"modernc.org/sqlite"
)

// source is an open datastore.
type source struct {
	cfg      Source
	db       *sql.DB
	postgres bool
}

// open opens s's database read-only; nothing connects until the first query.
func open(s Source) (*source, error) {
	if s.MaxRows == 0 {
		s.MaxRows = DefaultMaxRows
	}
	if s.Timeout <= 0 {
		s.Timeout = DefaultTimeout
	}
	if s.DSN != "" {
		cfg, err := pgx.ParseConfig(s.DSN)
		if err != nil {
			return nil, fmt.Errorf("datastore %s: the dsn: %w", s.Name, err)
		}
		// One statement per query (a prepared statement cannot hold two),
		// in sessions that are read-only and time-bounded by default.
		cfg.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
		cfg.RuntimeParams["default_transaction_read_only"] = "on"
		cfg.RuntimeParams["statement_timeout"] = strconv.FormatInt(s.Timeout.Milliseconds(), 10)
		cfg.RuntimeParams["idle_in_transaction_session_timeout"] = strconv.FormatInt(s.Timeout.Milliseconds(), 10)
		cfg.MaxProtocolMessageBodyLen = MaxRowBytes // a larger row fails the query
		db := stdlib.OpenDB(*cfg)
		db.SetMaxOpenConns(8)
		db.SetConnMaxIdleTime(time.Minute)
		return &source{cfg: s, db: db, postgres: true}, nil
	}
	q := url.Values{"mode": {"ro"}}
	q.Add("_pragma", "query_only(1)")
	q.Add("_pragma", "busy_timeout(5000)")
	db := sql.OpenDB(readOnlySQLite{dsn: "file:" + s.Path + "?" + q.Encode()})
	db.SetMaxOpenConns(4)
	db.SetConnMaxIdleTime(time.Minute)
	return &source{cfg: s, db: db}, nil
}

// readOnlySQLite connects to a SQLite file under an authorizer that lets
// a statement read and nothing else: no ATTACH (another file of the
// server), no pragma that could lift query_only, no writing.
type readOnlySQLite struct{ dsn string }

var sqliteDriver = &sqlite.Driver{}

func (c readOnlySQLite) Connect(ctx context.Context) (driver.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	conn, err := sqliteDriver.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	ar, ok := conn.(sqlite.AuthorizerRegisterer)
	if !ok {
		conn.Close()
		return nil, fmt.Errorf("datastore: the SQLite driver has no authorizer")
	}
	if err := ar.RegisterAuthorizer(readOnly); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

func (c readOnlySQLite) Driver() driver.Driver { return sqliteDriver }

// readOnly is the SQLite authorizer: reading, selecting, functions
// (load_extension aside), recursive CTEs and the pragmas that describe
// tables.
func readOnly(action sqlite.AuthorizerActionCode, arg1, arg2, _, _ string) sqlite.AuthorizerReturnCode {
	switch action {
	case sqlite.AuthRead, sqlite.AuthSelect, sqlite.AuthRecursive:
		return sqlite.AuthorizerOK
	case sqlite.AuthFunction:
		if arg2 == "load_extension" {
			return sqlite.AuthorizerDeny
		}
		return sqlite.AuthorizerOK
	case sqlite.AuthPragma:
		switch arg1 {
		case "table_info", "table_xinfo", "table_list", "index_list", "index_info", "foreign_key_list":
			return sqlite.AuthorizerOK
		}
	}
	return sqlite.AuthorizerDeny
}

// MaxRowBytes bounds what a query may hand the server at once, whatever
// SQL the model writes: a PostgreSQL row, a SQLite value (16 MiB). Past it
// the query fails.
const MaxRowBytes = 16 << 20

// sqliteLimitLength is SQLITE_LIMIT_LENGTH: the largest string or blob.
const sqliteLimitLength = 0

// querier is a *sql.Conn or *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// query runs one read-only statement; fn reads its rows. PostgreSQL runs it
// in a READ ONLY transaction, rolled back after; SQLite on a connection
// whose values are bounded by MaxRowBytes.
func (s *source) query(ctx context.Context, query string, args []any, fn func(*sql.Rows) error) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	var q querier
	if s.postgres {
		tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		if err != nil {
			return err
		}
		defer tx.Rollback()
		q = tx
	} else {
		c, err := s.db.Conn(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		if _, err := sqlite.Limit(c, sqliteLimitLength, MaxRowBytes); err != nil {
			return err
		}
		q = c
	}
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	if err := fn(rows); err != nil {
		return err
	}
	return rows.Err()
}
