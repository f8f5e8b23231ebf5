// Command cubicle is Cubicle's binary (the server, its CLI and the
// computers' agent): it wires the layers under internal/ into subcommands
// and holds no logic of its own. The benchmarks are a command of their
// own, cmd/cubicle-bench, so this binary carries none of their code.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox/kube/podagent"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/linux"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/linux/agentbin"
)

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(args []string) int
}

func commands() []command {
	return []command{
		{"serve", "serve the computers API over HTTP", serveCmd},
		{"run", "run one command in a fresh computer", runCmd},
		{"python", "run Python cells or a REPL in a computer's kernel", pythonCmd},
		{"mcp", "serve a server's computers as MCP tools over stdio", mcpCmd},
		{"shell", "attach this terminal to a terminal of a server's computer", shellCmd},
		{"keys", "create, list and revoke API keys", keysCmd},
		{"orgs", "create and list organisations", orgsCmd},
		{"template", "import, pull, build, list and remove templates (root filesystems)", templateCmd},
		{"gc", "remove what crashed computers left behind", gcCmd},
	}
}

func main() {
	if podagent.IsPod() { // a computer's agent in a Kubernetes pod (checked first: it may be PID 1)
		os.Exit(podagent.Main())
	}
	if linux.IsAgent() {
		os.Exit(linux.AgentMain())
	}
	os.Exit(dispatch(os.Args[1:]))
}

func dispatch(args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(os.Stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(args[1:])
		}
	}
	if args[0] == linux.AgentArg {
		fmt.Fprintln(os.Stderr, "cubicle: the agent runs only as PID 1 of a computer; use 'cubicle run'")
		return 2
	}
	if args[0] == linux.AgentBinaryArg && len(args) == 1 {
		return writeAgentBinary(os.Stdout)
	}
	fmt.Fprintf(os.Stderr, "cubicle: unknown command %q (see 'cubicle --help')\n", args[0])
	return 2
}

func usage(w *os.File) {
	fmt.Fprintln(w, "cubicle — disposable, locked-down Linux computers for AI agents")
	fmt.Fprintln(w, "\nUsage: cubicle <command> [flags]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-7s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'cubicle <command> --help' for a command's flags and an example.")
}

// writeAgentBinary writes the lean agent this binary carries (for drivers
// that run this binary as their agent, see linux.Config.AgentPath); 1 when
// it carries none.
func writeAgentBinary(w io.Writer) int {
	b := agentbin.Binary()
	if len(b) == 0 {
		fmt.Fprintln(os.Stderr, "cubicle: this binary carries no separate agent (built without 'make build'); it is its own agent")
		return 1
	}
	if _, err := w.Write(b); err != nil {
		return 1
	}
	return 0
}
