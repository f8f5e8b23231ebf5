// Package config loads Cubicle's configuration: one TOML file, every key
// overridable by an environment variable CUBICLE_<SECTION>_<KEY>, validated
// at startup so that a bad value stops the server with a message naming the
// key. Keys hold time as whole seconds (*_seconds); the sections' methods
// (Server.BodyTimeout, Computers.Lifetime, …) turn them into the
// time.Duration everything past this package holds. cmd/cubicle/serve.go
// turns the sections into each component's own configuration. It may import
// only the standard library and BurntSushi/toml.
package config
