package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/cubicle-sandbox/cubicle/internal/mcp"
)

const mcpUsage = `Usage: cubicle mcp [--url URL]

Serves Cubicle's MCP tools over stdin and stdout, for a local agent (an MCP
client that starts its servers as commands). The tools are those of a
running 'cubicle serve' (its URL from --url or CUBICLE_URL, the API key from
CUBICLE_KEY, never from a flag): every call is made by that server, with the
key's limits, capabilities and audit, as over HTTP at <URL>/mcp. It exits
when stdin ends; 1 when the server cannot be reached or refuses the key.
Nothing but MCP messages is written to stdout; errors go to stderr.

Example, in an MCP client's configuration:
  {"mcpServers": {"cubicle": {"command": "cubicle", "args": ["mcp"],
    "env": {"CUBICLE_URL": "http://127.0.0.1:8080", "CUBICLE_KEY": "cub_..."}}}}

Flags:
`

func mcpCmd(args []string) int {
	fs := newFlags("mcp", mcpUsage)
	serverURL := fs.String("url", envOr("CUBICLE_URL", defaultCubicleURL), "server URL (env CUBICLE_URL)")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "cubicle mcp: unexpected argument %q (see 'cubicle mcp --help')\n", fs.Arg(0))
		return 2
	}
	key := os.Getenv("CUBICLE_KEY")
	if key == "" {
		fmt.Fprintln(os.Stderr, "cubicle mcp: needs an API key in the environment variable CUBICLE_KEY (it is never taken from a flag, which other users can see in ps)")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	err := mcp.Relay(ctx, *serverURL, key, os.Stdin, os.Stdout)
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(os.Stderr, "cubicle mcp: %v\n", err)
		return 1
	}
	return 0
}
