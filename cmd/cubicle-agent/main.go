// Command cubicle-agent is a computer's agent alone: what `cubicle agent`
// runs, without the server's packages. It is built into the cubicle binary
// (internal/sandbox/linux/agentbin), never installed on its own.
package main

import (
	"fmt"
	"os"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox/linux"
)

func main() {
	if linux.IsAgent() {
		os.Exit(linux.AgentMain())
	}
	fmt.Fprintln(os.Stderr, "cubicle-agent runs only as PID 1 of a computer; use 'cubicle run'")
	os.Exit(2)
}
