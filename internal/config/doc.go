// Package config loads Cubicle's configuration: one TOML file, every key
// overridable by an environment variable CUBICLE_<SECTION>_<KEY>, validated
// at startup so that a bad value stops the server with a message naming the
// key. Keys hold time as whole seconds (*_seconds); the sections' methods
// (Server.BodyTimeout, Computers.Lifetime, …) turn them into the
// time.Duration everything past this package holds. cmd/cubicle/serve.go
// turns the sections into each component's own configuration. A key whose
// component has its own default (server.body_timeout_seconds: httpapi;
// [files]: files; the gateway's timeouts and max_rounds: responses) is 0
// in Default and 0 means that default, so the number is defined once, in
// the component; docs/api.md names it and cmd/cubicle's
// TestComponentDefaults checks the two agree. A limit a lower layer
// defines is read from there (a computer's least memory, disk and pids:
// internal/sandbox; the per-cell output default: internal/kernel). It may
// import the standard library, BurntSushi/toml, internal/sandbox and
// internal/kernel.
package config
