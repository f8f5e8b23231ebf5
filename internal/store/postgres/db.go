package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cubicle-sandbox/cubicle/internal/store"
	"github.com/cubicle-sandbox/cubicle/internal/store/seal"
)

//go:embed migrations/*.sql
var migrations embed.FS

// DB is a PostgreSQL-backed store.
type DB struct {
	pool    *pgxpool.Pool
	secrets *seal.Sealer // the key of organisations' domain secrets, in the data directory
}

var _ store.Store = (*DB)(nil)

// DefaultMaxConns bounds the pool unless the URL's pool_max_conns says
// otherwise (pgx's own default, 4 on small hosts, is too few for a
// server's concurrent requests, and the server lock keeps one).
const DefaultMaxConns = 16

// IsURL reports whether a store URL names a PostgreSQL database
// (postgres:// or postgresql://).
func IsURL(u string) bool {
	return strings.HasPrefix(u, "postgres://") || strings.HasPrefix(u, "postgresql://")
}

// Open connects to the database at the URL dsn (postgres://…; libpq's
// parameters, e.g. host=/run/postgresql for a socket, sslmode) and
// migrates it. Organisations' domain secrets are sealed with the key in
// seal.KeyFile of the directory dataDir, made at the first secret.
func Open(ctx context.Context, dsn, dataDir string) (*DB, error) {
	if !IsURL(dsn) {
		return nil, fmt.Errorf("store URL %q: not a postgres:// URL", Redact(dsn))
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("store URL %s: %w", Redact(dsn), err)
	}
	if !strings.Contains(dsn, "pool_max_conns") {
		cfg.MaxConns = max(cfg.MaxConns, DefaultMaxConns)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", Redact(dsn), err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open %s: %w", Redact(dsn), err)
	}
	s := &DB{pool: pool, secrets: seal.New(dataDir)}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open %s: %w", Redact(dsn), err)
	}
	return s, nil
}

// Redact is a store URL without its password, for messages and logs.
func Redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// Close closes the pool.
func (s *DB) Close() error {
	s.pool.Close()
	return nil
}

// Versions lists the numbers of the embedded migrations, in order.
func Versions() ([]int, error) {
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []int
	for _, name := range names {
		v, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(name, "migrations/"), "_", 2)[0])
		if err != nil {
			return nil, fmt.Errorf("migration %s: bad name", name)
		}
		out = append(out, v)
	}
	return out, nil
}

// migrate applies the migrations not yet applied, in one transaction
// holding schema_migrations' lock, so servers starting together on one
// database apply each once (and a failed one leaves the schema as it
// was). The table itself is made under an advisory lock: two sessions'
// CREATE TABLE IF NOT EXISTS can both try.
func (s *DB) migrate(ctx context.Context) error {
	versions, err := Versions()
	if err != nil {
		return err
	}
	err = s.tx(ctx, func(tx pgx.Tx) error {
		if err := lock(ctx, tx, lockMigrate); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)`)
		return err
	})
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `LOCK TABLE schema_migrations IN EXCLUSIVE MODE`); err != nil {
			return err
		}
		rows, _ := tx.Query(ctx, `SELECT version FROM schema_migrations`)
		applied, err := pgx.CollectRows(rows, pgx.RowTo[int])
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		for _, v := range versions {
			if slices.Contains(applied, v) {
				continue
			}
			name, _ := fs.Glob(migrations, fmt.Sprintf("migrations/%04d_*.sql", v))
			body, err := migrations.ReadFile(name[0])
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, string(body)); err != nil {
				return fmt.Errorf("migration %s: %w", name[0], err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)`, v, time.Now().Unix()); err != nil {
				return err
			}
		}
		return nil
	})
}

// tx runs fn in a transaction (read committed), committed when fn
// succeeds; its error is classified (errors.go).
func (s *DB) tx(ctx context.Context, fn func(pgx.Tx) error) error {
	return classify(pgx.BeginFunc(ctx, s.pool, fn))
}

// exec runs one statement outside a transaction and returns how many rows
// it touched; its error is classified.
func (s *DB) exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := s.pool.Exec(ctx, q, args...)
	return tag.RowsAffected(), classify(err)
}

// execOne is exec that wants a row touched: none is store.ErrNotFound
// about what.
func (s *DB) execOne(ctx context.Context, what, q string, args ...any) error {
	n, err := s.exec(ctx, q, args...)
	if err == nil && n == 0 {
		return fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	return err
}

// list runs a query and scans every row with scan.
func list[T any](ctx context.Context, s *DB, scan func(pgx.Row) (T, error), q string, args ...any) ([]T, error) {
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, classify(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (T, error) { return scan(r) })
	if out == nil {
		out = []T{}
	}
	return out, classify(err)
}

// one runs a query for one row scanned with scan: none is
// store.ErrNotFound about what.
func one[T any](ctx context.Context, q querier, what string, scan func(pgx.Row) (T, error), sql string, args ...any) (T, error) {
	v, err := scan(q.QueryRow(ctx, sql, args...))
	return v, notFound(err, what)
}

// querier is a pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// notFound is no row as store.ErrNotFound about what, other errors
// classified.
func notFound(err error, what string) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	return classify(err)
}

// Times are stored as Unix milliseconds, as in internal/store/sqlite.
func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMS(v int64) time.Time { return time.UnixMilli(v).UTC() }

func nullMS(t *time.Time) *int64 {
	if t == nil {
		return nil
	}
	v := t.UnixMilli()
	return &v
}

func fromNullMS(v *int64) *time.Time {
	if v == nil {
		return nil
	}
	t := fromMS(*v)
	return &t
}

// orEmpty is a JSON object as stored (empty: {}).
func orEmpty(b []byte) string {
	if len(b) == 0 {
		return "{}"
	}
	return string(b)
}
