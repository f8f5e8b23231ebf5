// Package governance holds who may do what: organisations, API keys (stored
// hashed) with capabilities in the seed's shape, authentication of bearer
// keys, clamping of requested limits to the key's and the deployment's, and
// the audit trail. It may import internal/store and the standard library.
package governance
