// Package datastore is the operator's datastores offered to models as
// tools: a SQLite file or a PostgreSQL database (config: gateway.datastores),
// queried read-only, each offered as the tool <name>__query (a SELECT the
// model writes), and the operator's named queries on them as sql__<name>
// tools (config: gateway.sql_tools). A tool answers the model with JSON
// rows, at most its max_rows; with "deliver": "computer" (Deliver) it
// writes every row, up to the deployment's limits, as CSV into the turn's
// computer at /workspace/results/<call id>.csv and the model reads only
// {"columns", "row_count", "truncated", "path"} (docs/tools.md, "Rows
// delivered to the computer").
//
// Read-only is enforced by the database, not by reading the SQL: a SQLite
// file is opened with mode=ro and query_only, under an authorizer that
// allows reading only (no ATTACH, no writing pragma); a PostgreSQL query
// runs in a READ ONLY transaction of a session whose
// default_transaction_read_only is on, as one prepared statement (so one
// statement), with a statement_timeout.
//
// It may import internal/computer (whether the turn's computer reaches the
// internet), internal/governance (the caller, the audit of a refused
// delivery), internal/sandbox (only its Files part: the CSV is written into
// the computer's workspace), internal/tools (argument decoding, the tools'
// definitions), internal/pii (the answer of a key that redacts personal
// data, while a delivery's CSV is written unredacted), internal/log and
// the standard library.
package datastore
