// Package sandboxtest is the one fake of internal/sandbox: a Driver whose
// computers answer each method with a function the test scripts, so the
// service and transport layers are tested without real computers. A method
// the test did not script fails with ErrNotScripted (never a nil-interface
// panic); lifecycle methods have working defaults (Kill and Destroy end the
// computer, closing Done). Workspace is an in-memory /workspace a test
// attaches to a computer's file calls. Start is the other side: a real
// computer on a real driver, destroyed when the test ends (the driver's and
// the agent's tests).
//
// Only test code imports this package; it builds for every GOOS. It may
// import internal/sandbox and the standard library.
package sandboxtest
