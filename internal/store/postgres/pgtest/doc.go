// Package pgtest runs a real PostgreSQL server for tests, for tests only:
// a cluster of its own made by initdb in a temporary directory (as an
// unprivileged user when the tests run as root: the server refuses root),
// listening on a unix socket in that directory only (no TCP port), with
// durability off for speed, stopped and removed at the end. Main shares
// one server per test binary; each test takes a schema of its own in a
// shared database (Schema: milliseconds) or a database of its own
// (Database: a template copied, about a second on a busy host).
// The binaries are Debian's postgresql-15 (scripts/setup.sh installs it),
// found under /usr/lib/postgresql/*/bin, on the PATH, or in
// $CUBICLE_POSTGRES_BIN. It may import no internal package (the standard
// library and pgx only).
package pgtest
