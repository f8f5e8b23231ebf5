package sandbox

import "time"

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
