// Package drivertest is the contract every sandbox.Driver keeps, as one
// test suite each driver's tests run (Run): create, exec (exit codes,
// separate stdout and stderr, stdin, the timeout), files (write, read,
// stat, list, the workspace's confinement), the workspace shared by files
// and processes, Python (a cell, rich output), a relayed kernel, the memory
// limit and destroy (Done closes, calls then fail with sandbox.ErrGone).
// What a driver cannot show in a given environment (a memory limit where
// nothing enforces one) is switched off by Options, and says so in the
// test's log.
//
// It is for tests only. It may import internal/sandbox, internal/kernel
// and the standard library.
package drivertest
