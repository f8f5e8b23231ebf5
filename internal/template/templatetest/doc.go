// Package templatetest makes small template roots for tests: a few of the
// host's programs with the libraries they load, laid out like a
// merged-/usr Debian root, and their EROFS images.
//
// Only test code imports this package. It may import internal/template,
// github.com/google/go-containerregistry and the standard library.
package templatetest
