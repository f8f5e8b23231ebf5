package sandbox

import (
	"fmt"
	"time"
)

// Limits of one python call (the seed's python tool: "1..600, default 30"),
// defined once for the agent that enforces the time bounds
// (internal/agent), the REST API (internal/computer), the python tool
// (internal/tools) and the CLI.
const (
	DefaultPythonTimeout = 30 * time.Second
	MaxPythonTimeout     = 600 * time.Second
	MaxPythonCells       = 64
	MaxPythonCellBytes   = 1 << 20
)

// PythonTimedOut is the seed's message of a python call past its timeout
// ("Command timed out after 30 seconds"): the agent answers it, the CLI
// falls back to it.
func PythonTimedOut(seconds int) string {
	return fmt.Sprintf("Command timed out after %d seconds", seconds)
}

// ExecTimedOut is the line of an exec past its timeout ("timed out after
// 30 seconds"): the REST answer's stderr and the exec tool's head line.
func ExecTimedOut(seconds int) string { return fmt.Sprintf("timed out after %d seconds", seconds) }
