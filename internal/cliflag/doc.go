// Package cliflag holds what Cubicle's two commands (cmd/cubicle and
// cmd/cubicle-bench) share to read their command lines: flag sets whose
// errors are one line naming the flag and whose --help prints the
// command's usage text, and flag values for sizes (512M, 1G), durations
// (30s, or whole seconds) and repeatable NAME=value lists. It holds no
// command of its own.
//
// It may import internal/config and the standard library (sizes are
// parsed and printed as the configuration does).
package cliflag
