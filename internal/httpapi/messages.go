package httpapi

import "github.com/cubicle-sandbox/cubicle/internal/computer"

// clientMessage is err's message for the client (computer.ClientMessage,
// which the MCP transport says too).
func clientMessage(err error) string { return computer.ClientMessage(err) }
