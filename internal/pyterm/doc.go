// Package pyterm is Python at a terminal: what 'cubicle python' does once
// its flags are parsed. A Backend runs the calls: Local, a computer of this
// host, answers through computer.PythonAnswer as the server does; Remote, a
// computer of a server, goes through internal/client. A Renderer prints
// outputs as they arrive (streams, tracebacks, images shown inline or
// saved) or, with Options.JSON, the whole result as the REST API's body
// (Options.Body). RunCells runs one call and maps its end to the exit
// status; RunREPL reads inputs as cells of one kernel, Ctrl-C interrupting
// the running one. cmd/cubicle parses the flags, makes the computer or the
// client and wires the signals; nothing here knows a flag.
//
// It may import internal/computer, internal/client, internal/kernel,
// internal/sandbox and internal/termimage.
package pyterm
