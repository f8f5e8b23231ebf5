//go:build cubicle_agent

package agentbin

import _ "embed"

//go:embed cubicle-agent
var binary []byte
