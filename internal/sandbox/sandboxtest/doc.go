// Package sandboxtest is the one fake of internal/sandbox: a Driver whose
// computers answer each method with a function the test scripts, so the
// service and transport layers are tested without real computers. A method
// the test did not script fails with ErrNotScripted (never a nil-interface
// panic); lifecycle methods have working defaults (Kill and Destroy end the
// computer, closing Done). Only test code imports this package; it imports
// internal/sandbox and the standard library.
package sandboxtest
