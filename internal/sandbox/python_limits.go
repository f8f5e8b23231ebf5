package sandbox

import "github.com/cubicle-sandbox/cubicle/internal/agent"

// Limits of one python call (the seed's python tool), defined once for the
// REST API (internal/computer), the python tool (internal/tools) and the
// CLI; the agent enforces the time bounds.
const (
	DefaultPythonTimeout = agent.DefaultPythonTimeout
	MaxPythonTimeout     = agent.MaxPythonTimeout
	MaxPythonCells       = 64
	MaxPythonCellBytes   = 1 << 20
)
