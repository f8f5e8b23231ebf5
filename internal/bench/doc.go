// Package bench measures how fast Cubicle starts a computer and runs a
// process in one, side by side with bubblewrap and runc on the same host:
// cold start to the first byte of output, create and destroy, and exec
// round trips through the agent. Runs of all paths are interleaved so that
// machine noise affects them equally; every computer, container, bundle and
// temporary directory is removed afterwards, also on error or cancel.
//
// It holds the measuring code (Run), the statistics (Summarize) and the
// text table; cmd/cubicle wires it to a driver as 'cubicle bench sandbox'.
//
// It may import internal/sandbox and the standard library only: the driver
// under test is passed in, and the peers run as external binaries.
package bench
