package config

// E2B configures the E2B SDKs' protocols at /e2b (docs/e2b.md), served on
// the same listener as the REST API.
type E2B struct {
	// Enabled serves them (default true), unless computers.enabled is
	// false (sandboxes are computers).
	Enabled bool `toml:"enabled"`
}
