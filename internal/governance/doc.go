// Package governance holds who may do what: organisations, API keys (stored
// hashed) with capabilities in the seed's shape, authentication of bearer
// keys, clamping of requested limits to the key's and the deployment's, and
// the audit trail. Its error kinds are errdefs-classified sentinels. It
// may import internal/store, internal/errdefs, internal/log and the standard
// library.
package governance
