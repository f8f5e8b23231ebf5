// Package storetest is the backend-agnostic test suite of store.Store, for
// tests only: every backend (internal/store/sqlite,
// internal/store/postgres) runs the same Run with a Backend that opens its
// stores, so both answer alike — exactly-once usage and audit, paging by
// id, errors classified the same way, organisations' domain secrets sealed
// at rest. It may import internal/store, internal/store/seal and
// internal/errdefs.
package storetest
