// Package egresslog keeps internet computers' records (internal/egress) in
// the store, in batches: one transaction per 256 records or 100 ms, so a
// computer opening connections fast costs the database little. A record
// that cannot be kept (the queue is full, the store refuses a batch) is
// never dropped silently: it is counted (Dropped) and logged.
//
// It may import internal/egress and internal/store.
package egresslog
