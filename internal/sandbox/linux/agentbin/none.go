//go:build !cubicle_agent

package agentbin

var binary []byte
