// Package httpapitest starts the real REST API (SQLite, the linux driver,
// real computers, over real HTTP) for the tests of the packages that are
// its clients (internal/client, internal/mcp). Only test code imports it.
// It may import internal/httpapi, internal/computer, internal/governance,
// internal/store/sqlite and internal/sandbox/linux.
package httpapitest
