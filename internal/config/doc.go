// Package config loads Cubicle's configuration: one TOML file, every key
// overridable by an environment variable CUBICLE_<SECTION>_<KEY>, validated
// at startup so that a bad value stops the server with a message naming the
// key. It may import only the standard library and BurntSushi/toml.
package config
