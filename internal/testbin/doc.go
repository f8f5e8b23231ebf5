// Package testbin gives tests the real cubicle binary: the one named by
// CUBICLE_BIN (make test builds it once), or one built here without cgo, as
// in production. Computers in tests run it as their agent; CLI tests run it
// as a command. It also holds the few helpers tests of several packages
// share (hostile-kernel code, waiting for goroutines to end, repeating a
// racing call: repeat.go). Only test code imports this package; it may
// import the standard library only.
package testbin
